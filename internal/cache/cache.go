// Package cache proves a tree fresh without evaluating: it remembers, per hash
// of every input a run reads (see Key), the files that run wanted on disk. When
// the inputs hash to a remembered key and the disk holds exactly those files
// (and nothing generate would prune), generate has nothing to do and check has
// nothing to report. Anything else — no entry, a corrupt one, any difference on
// disk, an input that cannot be read — is a miss, and the caller evaluates as
// if there were no cache.
package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gvisorgen/gvisorgen/internal/eval"
	"github.com/gvisorgen/gvisorgen/internal/layout"
	"github.com/gvisorgen/gvisorgen/internal/tree"
	"github.com/gvisorgen/gvisorgen/internal/warn"
)

// maxEntries is how many entries the cache folder keeps; the least recently
// used beyond that are removed when an entry is stored.
const maxEntries = 16

// Entry is what a successful run left on disk.
type Entry struct {
	Key string `json:"key"`
	// Full is true for a run over every target (no --target): then every
	// target folder on disk must be one the run knew.
	Full bool `json:"full"`
	// Targets is the number of targets the run evaluated.
	Targets int `json:"targets"`
	// Roots are the folders the run owned (gen.Output.Roots).
	Roots []string `json:"roots"`
	// Files are the wanted files, in the run's order.
	Files []File `json:"files"`
	// Warnings are what the run warned about, printed again on a hit (and
	// grouped again: they are kept whole, cause, target and all).
	Warnings []warn.Warning `json:"warnings,omitempty"`
}

// File is one wanted file.
type File struct {
	Path   string `json:"p"`
	SHA256 string `json:"h"`
	Size   int64  `json:"n"`
}

// NewEntry describes the wanted tree of a run.
func NewEntry(key string, full bool, targets int, roots []string, files []tree.File) *Entry {
	e := &Entry{Key: key, Full: full, Targets: targets, Roots: append([]string(nil), roots...)}
	e.Files = make([]File, len(files))
	for i, f := range files {
		sum := sha256.Sum256(f.Data)
		e.Files[i] = File{Path: f.Path, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(f.Data))}
	}
	return e
}

// Dir is the cache folder: $GVISORGEN_CACHE_DIR, else
// ${XDG_CACHE_HOME:-$HOME/.cache}/gvisorgen/tree; "" when none can be named.
func Dir() string {
	if d := os.Getenv("GVISORGEN_CACHE_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "gvisorgen", "tree")
	}
	if h := os.Getenv("HOME"); h != "" {
		return filepath.Join(h, ".cache", "gvisorgen", "tree")
	}
	return ""
}

// Disabled reports whether GVISORGEN_CACHE turns the cache off.
func Disabled() bool {
	switch strings.ToLower(os.Getenv("GVISORGEN_CACHE")) {
	case "off", "0", "false", "no":
		return true
	}
	return false
}

// The entry file: one line "Version sha256-of-the-rest", then the entry as
// JSON. The checksum turns any damage into a miss.
func encode(e *Entry) ([]byte, error) {
	body, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	var b bytes.Buffer
	b.Grow(len(body) + 100)
	fmt.Fprintf(&b, "%s %s\n", Version, hex.EncodeToString(sum[:]))
	b.Write(body)
	return b.Bytes(), nil
}

func decode(data []byte, key string) (*Entry, error) {
	head, body, ok := bytes.Cut(data, []byte("\n"))
	if !ok {
		return nil, errors.New("no header")
	}
	version, sum, ok := strings.Cut(string(head), " ")
	if !ok || version != Version {
		return nil, errors.New("another format")
	}
	got := sha256.Sum256(body)
	if hex.EncodeToString(got[:]) != sum {
		return nil, errors.New("checksum mismatch")
	}
	var e Entry
	if err := json.Unmarshal(body, &e); err != nil {
		return nil, err
	}
	if e.Key != key {
		return nil, errors.New("entry of another key")
	}
	for _, p := range e.Roots {
		if !local(p) {
			return nil, fmt.Errorf("bad root %q", p)
		}
	}
	for _, f := range e.Files {
		if !local(f.Path) || len(f.SHA256) != 2*sha256.Size || f.Size < 0 {
			return nil, fmt.Errorf("bad file %q", f.Path)
		}
	}
	return &e, nil
}

// local reports whether p is a clean, slash-separated path inside the root.
func local(p string) bool {
	return p != "" && path.Clean(p) == p && filepath.IsLocal(filepath.FromSlash(p)) && !strings.Contains(p, "\\")
}

// Load reads the entry of key from dir.
func Load(dir, key string) (*Entry, error) {
	data, err := os.ReadFile(filepath.Join(dir, key))
	if err != nil {
		return nil, err
	}
	return decode(data, key)
}

// Save writes the entry into dir atomically (a temporary file renamed into
// place) and trims the folder to maxEntries.
func Save(dir string, e *Entry) error {
	data, err := encode(e)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op once renamed
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, e.Key)); err != nil {
		return err
	}
	trim(dir)
	return nil
}

// trim removes the least recently used entries beyond maxEntries, and
// temporary files an interrupted run left behind.
func trim(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type aged struct {
		name string
		mod  time.Time
	}
	var keys []aged
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		if strings.HasPrefix(e.Name(), ".tmp-") {
			if time.Since(info.ModTime()) > time.Hour {
				_ = os.Remove(filepath.Join(dir, e.Name()))
			}
			continue
		}
		if b, err := hex.DecodeString(e.Name()); err == nil && len(b) == sha256.Size {
			keys = append(keys, aged{e.Name(), info.ModTime()})
		}
	}
	if len(keys) <= maxEntries {
		return
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].mod.After(keys[j].mod) })
	for _, k := range keys[maxEntries:] {
		_ = os.Remove(filepath.Join(dir, k.name))
	}
}

// Fresh checks the disk under root against the entry: every wanted file is a
// regular file (never a link) of the same size and sha256; no file in the
// roots is one generate would prune; and, for a full run, every target folder
// under overlays/, generated/, delivery/ and smoke/ is one the entry owns (a
// folder of a target that is not declared would be pruned). It returns why
// not, or "" when the tree is fresh.
func Fresh(root string, e *Entry) string {
	// Never read through a link where generate would refuse to write.
	if err := tree.CheckRoots(root, append(slices.Clone(layout.Outputs), e.Roots...)); err != nil {
		return err.Error()
	}
	wanted := make(map[string]bool, len(e.Files))
	for _, f := range e.Files {
		wanted[f.Path] = true
	}
	if e.Full {
		owned := make(map[string]bool, len(e.Roots))
		for _, r := range e.Roots {
			owned[r] = true
		}
		for _, top := range layout.Outputs {
			entries, err := os.ReadDir(filepath.Join(root, top))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return err.Error()
			}
			for _, d := range entries {
				if d.IsDir() && !owned[path.Join(top, d.Name())] {
					return "folder of an unknown target: " + path.Join(top, d.Name())
				}
			}
		}
	}
	// A hand-written kustomization of another spelling beside a generated
	// one is refused by a full run; it is no input the key covers.
	for _, r := range e.Roots {
		if top, _, _, _ := layout.Output(r + "/"); top != layout.OverlaysDir {
			continue
		}
		for _, n := range layout.KustomizationNames {
			if n == layout.Kustomization {
				continue
			}
			if _, err := os.Lstat(filepath.Join(root, filepath.FromSlash(r), n)); err == nil {
				return "a foreign kustomization file: " + path.Join(r, n)
			}
		}
	}
	if why := sameFiles(root, e.Files); why != "" {
		return why
	}
	extra, err := tree.Prunable(root, e.Roots, wanted)
	if err != nil {
		return err.Error()
	}
	if len(extra) > 0 {
		return "file to prune or report: " + extra[0]
	}
	return ""
}

// sameFiles compares the wanted files with the disk, several at a time; the
// first difference stops the rest.
func sameFiles(root string, files []File) string {
	workers := min(max(2*runtime.GOMAXPROCS(0), 4), 16, len(files))
	var (
		next   atomic.Int64
		failed atomic.Bool
		mu     sync.Mutex
		why    string
		wg     sync.WaitGroup
	)
	fail := func(s string) {
		mu.Lock()
		if why == "" {
			why = s
		}
		mu.Unlock()
		failed.Store(true)
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := sha256.New()
			var sum [sha256.Size]byte
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= len(files) {
					return
				}
				f := files[i]
				h.Reset()
				if s := sameFile(filepath.Join(root, filepath.FromSlash(f.Path)), f, h, sum[:0]); s != "" {
					fail(f.Path + ": " + s)
				}
			}
		}()
	}
	wg.Wait()
	return why
}

func sameFile(name string, want File, h hash.Hash, sum []byte) string {
	if fi, err := os.Lstat(name); err != nil {
		return err.Error()
	} else if !fi.Mode().IsRegular() {
		return "not a regular file"
	}
	f, err := os.Open(name)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err.Error()
	}
	if !fi.Mode().IsRegular() {
		return "not a regular file"
	}
	if fi.Size() != want.Size {
		return "size differs"
	}
	n, err := io.Copy(h, f)
	if err != nil {
		return err.Error()
	}
	if n != want.Size {
		return "size differs"
	}
	if hex.EncodeToString(h.Sum(sum)) != want.SHA256 {
		return "content differs"
	}
	return ""
}

// Session is the cache for one run of generate or check. A nil *Session is
// a cache that is off: it never hits and stores nothing.
type Session struct {
	opts  eval.Options
	dir   string
	key   string
	debug io.Writer
	// opened is when the run began reading its inputs.
	opened time.Time
}

// mtimeSlack covers file systems whose timestamps are coarse: an input
// written this long before a run counts as written during it.
const mtimeSlack = 2 * time.Second

// Open starts a session: off when off is true or GVISORGEN_CACHE=off, or when
// the inputs cannot all be read. With GVISORGEN_CACHE_DEBUG set (not 0), it
// tells stderr "cache: hit", "cache: miss (why)" and "cache: stored".
func Open(opts eval.Options, off bool, stderr io.Writer) *Session {
	var debug io.Writer
	if d := os.Getenv("GVISORGEN_CACHE_DEBUG"); d != "" && d != "0" {
		debug = stderr
	}
	say := func(format string, args ...any) {
		if debug != nil {
			fmt.Fprintf(debug, format+"\n", args...)
		}
	}
	switch {
	case off:
		say("cache: miss (off: --no-cache)")
		return nil
	case Disabled():
		say("cache: miss (off: GVISORGEN_CACHE=%s)", os.Getenv("GVISORGEN_CACHE"))
		return nil
	}
	dir := Dir()
	if dir == "" {
		say("cache: miss (no cache folder: set GVISORGEN_CACHE_DIR, XDG_CACHE_HOME or HOME)")
		return nil
	}
	opened := time.Now()
	key, err := Key(opts)
	if err != nil {
		say("cache: miss (inputs not hashed: %v)", err)
		return nil
	}
	return &Session{opts: opts, dir: dir, key: key, debug: debug, opened: opened}
}

func (s *Session) say(format string, args ...any) {
	if s.debug != nil {
		fmt.Fprintf(s.debug, format+"\n", args...)
	}
}

// Lookup returns the entry when the tree under the run's root is exactly
// what it remembers, else nil.
func (s *Session) Lookup() *Entry {
	if s == nil {
		return nil
	}
	e, err := Load(s.dir, s.key)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			s.say("cache: miss (no entry)")
		} else {
			s.say("cache: miss (entry: %v)", err)
		}
		return nil
	}
	if e.Full != (len(s.opts.Only) == 0) {
		s.say("cache: miss (entry of another selection)")
		return nil
	}
	if why := Fresh(s.opts.Root, e); why != "" {
		s.say("cache: miss (%s)", why)
		return nil
	}
	// Recently used: trim keeps it.
	now := time.Now()
	_ = os.Chtimes(filepath.Join(s.dir, s.key), now, now)
	s.say("cache: hit")
	return e
}

// Store remembers that the disk now holds exactly files (and nothing to prune
// in roots). Call it only once the tree on disk is the wanted tree. Nothing
// is stored when an input changed while the run evaluated — also when it was
// changed and changed back (the run may have read the in-between content, and
// the key would not show it): an input written during the run is enough.
// Errors writing the cache are ignored.
func (s *Session) Store(targets int, roots []string, files []tree.File, warnings []warn.Warning) {
	if s == nil {
		return
	}
	key, newest, err := keyInfo(s.opts)
	if err != nil || key != s.key {
		s.say("cache: not stored (the inputs changed during the run)")
		return
	}
	if !newest.Before(s.opened.Add(-mtimeSlack)) {
		s.say("cache: not stored (an input was written during the run)")
		return
	}
	e := NewEntry(s.key, len(s.opts.Only) == 0, targets, roots, files)
	e.Warnings = warnings
	if err := Save(s.dir, e); err != nil {
		s.say("cache: not stored (%v)", err)
		return
	}
	s.say("cache: stored")
}
