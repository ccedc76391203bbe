package tree

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// UnsafeError says that a path gvisorgen would write, read as its own, or
// prune is not a plain file in a plain folder inside the root: a symbolic
// link, a file where a folder belongs, or a path that leaves the root.
// Nothing has been written when it is returned.
type UnsafeError struct {
	Path string // slash-separated, relative to the root
	Why  string
}

func (e *UnsafeError) Error() string {
	return fmt.Sprintf("%s: %s; gvisorgen writes only plain files in plain folders of the repository, never through a symbolic link: nothing was written", e.Path, e.Why)
}

// checkRel reports whether p is a clean, relative, slash-separated path that
// stays inside the root.
func checkRel(p string) error {
	if p == "" || path.Clean(p) != p || !filepath.IsLocal(filepath.FromSlash(p)) || strings.Contains(p, "\\") {
		return &UnsafeError{Path: p, Why: "not a clean path inside the repository"}
	}
	return nil
}

// checkDir checks that every component of the folder dir below root is a real
// folder or absent; an absent one ends the walk (nothing below it exists).
// The root itself may be reached through a link (CI workspaces often are).
func checkDir(root, dir string) (exists bool, err error) {
	if err := checkRel(dir); err != nil {
		return false, err
	}
	cur := ""
	for _, part := range strings.Split(dir, "/") {
		cur = path.Join(cur, part)
		fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(cur)))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("reading %s: %w", cur, err)
		case fi.Mode()&fs.ModeSymlink != 0:
			return false, &UnsafeError{Path: cur, Why: "is a symbolic link"}
		case !fi.IsDir():
			return false, &UnsafeError{Path: cur, Why: "is not a folder"}
		}
	}
	return true, nil
}

// readOwned reads a file that gvisorgen may own, without following a link.
// A missing file is (nil, nil) with fs.ErrNotExist.
func readOwned(root, p string) ([]byte, error) {
	full := filepath.Join(root, filepath.FromSlash(p))
	fi, err := os.Lstat(full)
	if err != nil {
		return nil, err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, &UnsafeError{Path: p, Why: "is a symbolic link"}
	case !fi.Mode().IsRegular():
		return nil, &UnsafeError{Path: p, Why: "is not a regular file"}
	}
	b, err := os.ReadFile(full)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", p, err)
	}
	return b, nil
}

// CheckRoots checks that the owned folders and the folders above them are
// real folders (or absent), so that reading, writing or pruning in them never
// leaves the root.
func CheckRoots(root string, roots []string) error {
	for _, r := range roots {
		if _, err := checkDir(root, r); err != nil {
			return err
		}
	}
	return nil
}

// Staging files are named so that no tool reads them as manifests: hidden,
// and not ending in .yaml, .yml or .json. A run that was killed may leave
// them behind; the next Plan prunes them.
const (
	stagePrefix  = ".gvisorgen-stage."
	backupPrefix = ".gvisorgen-old."
)

// IsStaging reports whether a file name is one of Apply's staging files.
func IsStaging(name string) bool {
	return strings.HasPrefix(name, stagePrefix) || strings.HasPrefix(name, backupPrefix)
}
