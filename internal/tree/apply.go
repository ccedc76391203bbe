package tree

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// ApplyError is a failure to write the tree. Switched lists the files that
// hold their new content (or are gone) and could not be put back; when it
// is empty the tree is as it was before.
type ApplyError struct {
	Err      error
	Switched []string
}

func (e *ApplyError) Error() string {
	if len(e.Switched) == 0 {
		return fmt.Sprintf("%v; nothing was changed: the tree is as it was", e.Err)
	}
	return fmt.Sprintf("%v; these %d files were already switched and could not be put back: %s; run generate again to repair them",
		e.Err, len(e.Switched), strings.Join(e.Switched, ", "))
}

func (e *ApplyError) Unwrap() error { return e.Err }

// ops are the file-system calls Apply makes; tests make any one of them fail.
type ops interface {
	Mkdir(name string) error
	WriteTemp(dir, pattern string, data []byte) (string, error)
	Link(oldname, newname string) error
	Rename(oldname, newname string) error
	Remove(name string) error
}

// osOps makes the calls through an os.Root opened on the tree's root when it
// has one (Apply's): the lstat checks before a write refuse links, and the
// root makes a write that would still leave the repository fail instead (a
// folder swapped for a link between the check and the write: the race the
// checks alone cannot close). Its zero value calls os directly (tests).
type osOps struct {
	root *os.Root
	dir  string // the root's path: the callers' names start with it
}

// rel is name relative to the root.
func (o osOps) rel(name string) (string, error) {
	r, err := filepath.Rel(o.dir, name)
	if err != nil || !filepath.IsLocal(r) {
		return "", &UnsafeError{Path: name, Why: "is not inside the repository"}
	}
	return r, nil
}

func (o osOps) Mkdir(name string) error {
	if o.root == nil {
		return os.Mkdir(name, 0o755)
	}
	r, err := o.rel(name)
	if err != nil {
		return err
	}
	return o.root.Mkdir(r, 0o755)
}

// rel2 is old and new relative to the root.
func (o osOps) rel2(old, new string) (string, string, error) {
	ro, err := o.rel(old)
	if err != nil {
		return "", "", err
	}
	rn, err := o.rel(new)
	return ro, rn, err
}

func (o osOps) Link(old, new string) error {
	if o.root == nil {
		return os.Link(old, new)
	}
	ro, rn, err := o.rel2(old, new)
	if err != nil {
		return err
	}
	return o.root.Link(ro, rn)
}

func (o osOps) Rename(old, new string) error {
	if o.root == nil {
		return os.Rename(old, new)
	}
	ro, rn, err := o.rel2(old, new)
	if err != nil {
		return err
	}
	return o.root.Rename(ro, rn)
}

func (o osOps) Remove(name string) error {
	if o.root == nil {
		return os.Remove(name)
	}
	r, err := o.rel(name)
	if err != nil {
		return err
	}
	return o.root.Remove(r)
}

// WriteTemp writes data to a new file in dir named by pattern (its "*" a
// random number, as os.CreateTemp does), mode 0644, and returns its path.
func (o osOps) WriteTemp(dir, pattern string, data []byte) (string, error) {
	var (
		f    *os.File
		name string
		err  error
	)
	if o.root == nil {
		f, err = os.CreateTemp(dir, pattern)
		if err == nil {
			name = f.Name()
		}
	} else {
		var rdir string
		if rdir, err = o.rel(dir); err != nil {
			return "", err
		}
		for try := 0; try < 100; try++ {
			base := strings.Replace(pattern, "*", strconv.FormatUint(uint64(rand.Uint32()), 10), 1)
			f, err = o.root.OpenFile(filepath.Join(rdir, base), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
			if !errors.Is(err, fs.ErrExist) {
				name = filepath.Join(dir, base)
				break
			}
		}
	}
	if err != nil {
		return "", err
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Chmod(0o644)
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		o.Remove(name)
		return "", werr
	}
	return name, nil
}

// Apply carries out the changes all or nothing. It stages every new file as
// a temporary file in its folder; only when all are written does it switch
// them into place by rename, keeping each replaced or deleted file under a
// backup name (a hard link) until the end. Any failure puts back what was
// switched, removes what was staged and the folders it made, and returns an
// ApplyError; if putting back fails too, the error lists exactly the files
// left switched. A run killed midway leaves whole files (old or new) and
// staging files that no kustomize or GitOps tool reads, which the next Plan
// prunes. Folders of deleted files that end up empty are removed. Foreign
// changes are left as they are.
func Apply(root string, changes []Change) error {
	r, err := os.OpenRoot(root)
	if err != nil {
		return &ApplyError{Err: fmt.Errorf("opening the repository: %w", err)}
	}
	defer r.Close()
	return apply(root, changes, osOps{root: r, dir: root})
}

// writable drops the Foreign changes: a file gvisorgen did not write is
// never written nor deleted.
func writable(changes []Change) []Change {
	return slices.DeleteFunc(slices.Clone(changes), func(c Change) bool { return c.Action == Foreign })
}

type step struct {
	c      Change
	full   string // the file
	temp   string // the staged new content
	backup string // the old file's backup name, once switched
}

func apply(root string, changes []Change, o ops) error {
	changes = writable(changes)
	var (
		made  []string // folders this run created, parents first
		steps = make([]*step, 0, len(changes))
		known = map[string]bool{}
	)
	undo := func() {
		for _, s := range steps {
			if s.temp != "" {
				o.Remove(s.temp)
			}
		}
		for i := len(made) - 1; i >= 0; i-- {
			o.Remove(made[i])
		}
	}
	// Stage.
	for _, c := range changes {
		if err := checkRel(c.Path); err != nil {
			undo()
			return &ApplyError{Err: err}
		}
		dir := path.Dir(c.Path)
		if !known[dir] {
			if _, err := checkDir(root, dir); err != nil {
				undo()
				return &ApplyError{Err: err}
			}
			if c.Action != Delete {
				m, err := mkdirs(root, dir, o)
				made = append(made, m...)
				if err != nil {
					undo()
					return &ApplyError{Err: fmt.Errorf("writing %s: %w", c.Path, err)}
				}
				known[dir] = true
			}
		}
		s := &step{c: c, full: filepath.Join(root, filepath.FromSlash(c.Path))}
		steps = append(steps, s)
		if c.Action == Delete {
			continue
		}
		tmp, err := o.WriteTemp(filepath.Dir(s.full), stagePrefix+path.Base(c.Path)+".*", c.New)
		if err != nil {
			undo()
			return &ApplyError{Err: fmt.Errorf("writing %s: %w", c.Path, err)}
		}
		s.temp = tmp
	}
	// Switch.
	for i, s := range steps {
		if err := switchOne(s, o); err != nil {
			left := putBack(steps[:i], o)
			undo()
			return &ApplyError{Err: err, Switched: left}
		}
	}
	// Commit: drop the backups, then the folders that pruning emptied (a
	// target that is gone); a folder that still holds anything stays.
	var emptied []string
	for _, s := range steps {
		if s.backup != "" {
			o.Remove(s.backup)
		}
		if s.c.Action == Delete {
			emptied = append(emptied, filepath.Dir(s.full))
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(emptied)))
	for _, d := range emptied {
		o.Remove(d)
	}
	return nil
}

// switchOne puts one staged change in place. Afterwards s.temp is empty and,
// for an update or a delete, s.backup names the old file.
func switchOne(s *step, o ops) error {
	dir, base := filepath.Dir(s.full), filepath.Base(s.full)
	// The backup takes the staged file's random suffix, so it is unique.
	b := filepath.Join(dir, backupPrefix+base+".deleted")
	if s.temp != "" {
		b = filepath.Join(dir, backupPrefix+base+strings.TrimPrefix(filepath.Base(s.temp), stagePrefix+base))
	}
	switch s.c.Action {
	case Create:
		if err := o.Rename(s.temp, s.full); err != nil {
			return fmt.Errorf("writing %s: %w", s.c.Path, err)
		}
		s.temp = ""
	case Update:
		if err := o.Link(s.full, b); err != nil {
			return fmt.Errorf("keeping %s until the run is done: %w", s.c.Path, err)
		}
		if err := o.Rename(s.temp, s.full); err != nil {
			o.Remove(b)
			return fmt.Errorf("writing %s: %w", s.c.Path, err)
		}
		s.backup = b
		s.temp = ""
	case Delete:
		if err := o.Rename(s.full, b); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("pruning %s: %w", s.c.Path, err)
		}
		s.backup = b
	}
	return nil
}

// putBack undoes switched steps, last first, and returns the files it could
// not restore.
func putBack(steps []*step, o ops) []string {
	var left []string
	for i := len(steps) - 1; i >= 0; i-- {
		s := steps[i]
		var err error
		switch s.c.Action {
		case Create:
			err = o.Remove(s.full)
		case Update, Delete:
			err = o.Rename(s.backup, s.full)
			if err == nil {
				s.backup = ""
			}
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			left = append(left, s.c.Path)
		}
	}
	sort.Strings(left)
	return left
}

// mkdirs creates the missing folders of dir (slash-separated, below root),
// one at a time, and returns those it created.
func mkdirs(root, dir string, o ops) ([]string, error) {
	var made []string
	cur := ""
	for _, part := range strings.Split(dir, "/") {
		cur = path.Join(cur, part)
		full := filepath.Join(root, filepath.FromSlash(cur))
		if fi, err := os.Lstat(full); err == nil {
			if !fi.IsDir() || fi.Mode()&fs.ModeSymlink != 0 {
				return made, &UnsafeError{Path: cur, Why: "is not a plain folder"}
			}
			continue
		}
		if err := o.Mkdir(full); err != nil {
			return made, err
		}
		made = append(made, full)
	}
	return made, nil
}
