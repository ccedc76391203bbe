// Package gitsrc materialises the generator's inputs as they are at a git ref,
// in a temporary folder, without touching the checkout or the index.
package gitsrc

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gvisorgen/gvisorgen/internal/layout"
)

// Resolve returns the commit a ref names, or an error saying the ref is unknown.
func Resolve(repo, ref string) (string, error) {
	out, err := git(repo, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("unknown git ref %q", ref)
	}
	return strings.TrimSpace(string(out)), nil
}

// CheckRoot says, with the next step, why repo cannot be diffed: it is not
// in a git repository, or it is not the repository's root (git's paths
// would be relative to the subfolder).
func CheckRoot(repo string) error {
	out, err := git(repo, "rev-parse", "--show-toplevel")
	if err != nil {
		return errors.New("not in a git repository: diff compares two commits (base and head); run it in a clone of the repository (or `git init` and commit first), or use `gvisorgen check` to compare the tree with the inputs")
	}
	top := strings.TrimSpace(string(out))
	abs, err := filepath.Abs(repo)
	if err != nil {
		return err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	if top != abs {
		return fmt.Errorf("%s is not the repository's root (%s): run diff from the root, or pass --root %s", repo, top, top)
	}
	return nil
}

// MergeBase is the merge base of HEAD with the main branch (origin/main, main,
// origin/master or master, the first that exists).
func MergeBase(repo string) (string, error) {
	for _, b := range []string{"origin/main", "main", "origin/master", "master"} {
		if _, err := Resolve(repo, b); err != nil {
			continue
		}
		out, err := git(repo, "merge-base", "HEAD", b)
		if err != nil {
			return "", fmt.Errorf("merge base of HEAD and %s: %w", b, err)
		}
		return strings.TrimSpace(string(out)), nil
	}
	return "", errors.New("no main branch (origin/main, main, origin/master, master) to diff against: pass --base")
}

// Export writes the generator's inputs and its committed outputs at commit
// into dest: what `diff` evaluates, and what Argo CD or Flux would sync.
func Export(repo, commit, dest string) error {
	out, err := git(repo, "ls-tree", "--name-only", commit, "--")
	if err != nil {
		return err
	}
	present := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		present[l] = true
	}
	args := []string{"archive", "--format=tar", commit, "--"}
	n := 0
	for _, p := range append(slices.Clone(layout.Inputs), layout.Written...) {
		if slices.Contains(args, p) {
			continue
		}
		if present[p] {
			args = append(args, p)
			n++
		}
	}
	if n == 0 {
		return fmt.Errorf("commit %.12s holds none of %s", commit, strings.Join(layout.Inputs, ", "))
	}
	tarball, err := git(repo, args...)
	if err != nil {
		return err
	}
	return untar(bytes.NewReader(tarball), dest)
}

func untar(r io.Reader, dest string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading git archive: %w", err)
		}
		name := filepath.Clean(filepath.FromSlash(h.Name))
		if !filepath.IsLocal(name) {
			return fmt.Errorf("git archive: unsafe path %q", h.Name)
		}
		p := filepath.Join(dest, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				return err
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				return err
			}
		}
		// Symlinks and the rest are not inputs of the generator.
	}
}

func git(repo string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %v: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// Commit is what an artifact says of the commit it was built from.
type Commit struct {
	Hash string
	// Branch is the checked-out branch; "" on a detached HEAD (CI's usual).
	Branch string
	// Committed is the committer's time: the same commit, the same time.
	Committed time.Time
	// Origin is the URL of the remote "origin" without credentials; "" when
	// there is none.
	Origin string
}

// Head describes HEAD, and refuses when path (relative to repo) differs from
// it in the work tree or the index: what would be described is then not what
// is there.
func Head(repo, path string) (*Commit, error) {
	out, err := git(repo, "show", "-s", "--format=%H %cI", "HEAD")
	if err != nil {
		return nil, fmt.Errorf("not in a git repository with a commit (%v): give --revision and --created", err)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		return nil, fmt.Errorf("git show HEAD: unexpected output %q", out)
	}
	when, err := time.Parse(time.RFC3339, f[1])
	if err != nil {
		return nil, fmt.Errorf("git show HEAD: committer time %q: %w", f[1], err)
	}
	c := &Commit{Hash: f[0], Committed: when}
	if b, err := git(repo, "symbolic-ref", "--quiet", "--short", "HEAD"); err == nil {
		c.Branch = strings.TrimSpace(string(b))
	}
	if o, err := git(repo, "remote", "get-url", "origin"); err == nil {
		c.Origin = redact(strings.TrimSpace(string(o)))
	}
	st, err := git(repo, "status", "--porcelain", "--untracked-files=all", "--", path)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(st)) > 0 {
		return nil, fmt.Errorf("%s differs from commit %.12s (uncommitted changes):\n%s\ncommit them first: the artifact says which commit it holds", path, c.Hash, strings.TrimRight(string(st), "\n"))
	}
	return c, nil
}

// redact drops a URL's user and password (a token in a CI clone's origin
// must not be published in an artifact's annotations).
func redact(u string) string {
	if p, err := url.Parse(u); err == nil && p.User != nil {
		p.User = nil
		return p.String()
	}
	return u
}
