package cache

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/gvisorgen/gvisorgen/internal/eval"
	"github.com/gvisorgen/gvisorgen/internal/layout"
)

// Version names the key's encoding and the entry's format; changing either
// changes it.
const Version = "gvisorgen-tree-cache/v3" // v3: warnings are structured (warn.Warning), not lines

// envKeys are the environment variables that can change what CUE evaluates
// to; their values are part of the key.
var envKeys = []string{"CUE_EXPERIMENT", "CUE_DEBUG", "CUE_REGISTRY"}

// Key is the hash of everything a generate or check run reads: the binary,
// the options, the files under the CUE folder (recursively), the files
// directly in the targets folder, every -f file, and every file under
// overlays/*/patches/. It fails when any of them cannot be read; the caller
// then runs without the cache.
func Key(opts eval.Options) (string, error) {
	key, _, err := keyInfo(opts)
	return key, err
}

// keyInfo is Key and the latest modification time of the files it hashed.
func keyInfo(opts eval.Options) (string, time.Time, error) {
	key, k, err := keyOf(opts)
	if err != nil {
		return "", time.Time{}, err
	}
	return key, k.newest, nil
}

func keyOf(opts eval.Options) (string, *keyWriter, error) {
	k := newKeyWriter()
	key, err := k.key(opts)
	return key, k, err
}

func (k *keyWriter) key(opts eval.Options) (string, error) {
	id, err := binaryID()
	if err != nil {
		return "", err
	}
	cueDir, targetsDir := dirs(opts)
	k.field("version", Version)
	k.field("binary", id)
	for _, name := range envKeys {
		v, ok := os.LookupEnv(name)
		if ok {
			k.field("env "+name, "set:"+v)
		} else {
			k.field("env "+name, "unset")
		}
	}
	k.field("cue-dir", cueDir)
	k.field("targets-dir", targetsDir)
	for _, f := range opts.ValuesFiles {
		if f == "-" {
			return "", errors.New("values from stdin (-f -) are not hashed")
		}
		sum, mtime, err := fileSumTime(f)
		if err != nil {
			return "", err
		}
		k.touched(mtime)
		k.field("values-file", f)
		k.field("values-sha256", sum)
	}
	for _, s := range opts.Sets {
		k.field("set", s)
	}
	for _, t := range opts.Only {
		k.field("target", t)
	}

	// The CUE module: every file, cue.mod/ and the installer scripts too.
	// The loader looks for cue.mod upwards; when it is not in the CUE folder,
	// files above it (cue.mod/, package files of parent folders) are read too,
	// and hashing only the folder would miss them: no key then.
	if fi, err := os.Stat(filepath.Join(opts.Root, cueDir, "cue.mod")); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%s has no cue.mod folder: the module root is elsewhere, which the cache does not cover", cueDir)
	}
	k.field("section", "cue")
	if err := k.tree(filepath.Join(opts.Root, cueDir), ""); err != nil {
		return "", err
	}

	// The targets folder: every file directly in it, and the names of its
	// folders (eval refuses one that is not hidden: a hit must not hide that).
	k.field("section", "targets")
	entries, err := os.ReadDir(filepath.Join(opts.Root, targetsDir))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		k.field("targets", "absent")
	case err != nil:
		return "", err
	default:
		for _, e := range entries {
			if e.IsDir() {
				if eval.NotRead(e.Name(), true) != "" {
					k.field("targets-folder", e.Name())
				}
				continue
			}
			if err := k.file(filepath.Join(opts.Root, targetsDir, e.Name()), e.Name(), e.Type()); err != nil {
				return "", err
			}
		}
	}

	// The hand-written patches of every overlay.
	k.field("section", "patches")
	k.noLinks = true
	overlays := filepath.Join(opts.Root, layout.OverlaysDir)
	entries, err = os.ReadDir(overlays)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	for _, e := range entries {
		if e.Type().IsRegular() {
			continue // a file beside the target folders, e.g. a README
		}
		dir := filepath.Join(overlays, e.Name(), layout.PatchesDir)
		// Lstat: rendering refuses a linked patches/ folder, so the key must
		// not follow one either (a hit would hide the refusal).
		fi, err := os.Lstat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
			continue
		case err != nil:
			return "", err
		case !fi.IsDir():
			return "", fmt.Errorf("%s is not a folder", dir)
		}
		if err := k.tree(dir, path.Join(layout.OverlaysDir, e.Name(), layout.PatchesDir)); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(k.h.Sum(nil)), nil
}

func dirs(opts eval.Options) (cueDir, targetsDir string) {
	cueDir, targetsDir = opts.CUEDir, opts.TargetsDir
	if cueDir == "" {
		cueDir = layout.CUEDir
	}
	if targetsDir == "" {
		targetsDir = layout.TargetsDir
	}
	return cueDir, targetsDir
}

// keyWriter feeds tagged, length-prefixed fields into a hash, so that no two
// different sequences of fields encode to the same bytes.
type keyWriter struct {
	h hash.Hash
	// newest is the latest modification time of the files hashed.
	newest time.Time
	// noLinks refuses links (set while hashing patches/).
	noLinks bool
}

func (k *keyWriter) touched(t time.Time) {
	if t.After(k.newest) {
		k.newest = t
	}
}

func newKeyWriter() *keyWriter { return &keyWriter{h: sha256.New()} }

func (k *keyWriter) field(tag, value string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(tag)))
	k.h.Write(n[:])
	io.WriteString(k.h, tag)
	binary.BigEndian.PutUint64(n[:], uint64(len(value)))
	k.h.Write(n[:])
	io.WriteString(k.h, value)
}

// tree adds every file under dir, recursively, in lexical order (os.ReadDir
// sorts), named by its slash-separated path under rel.
func (k *keyWriter) tree(dir, rel string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := path.Join(rel, e.Name())
		if e.IsDir() {
			if err := k.tree(filepath.Join(dir, e.Name()), p); err != nil {
				return err
			}
			continue
		}
		if err := k.file(filepath.Join(dir, e.Name()), p, e.Type()); err != nil {
			return err
		}
	}
	return nil
}

// file adds one file: a regular file or a link to one (the loader follows
// it). Anything else (a link to a folder, a pipe, a device), and any link
// under patches/ (rendering refuses those: a hit must not hide that), is not
// hashed: no cache for this run.
func (k *keyWriter) file(abs, rel string, mode fs.FileMode) error {
	if mode&fs.ModeSymlink != 0 {
		if k.noLinks {
			return fmt.Errorf("%s is a link", abs)
		}
		fi, err := os.Stat(abs)
		if err != nil {
			return err
		}
		mode = fi.Mode()
	}
	if !mode.IsRegular() {
		return fmt.Errorf("%s is not a regular file", abs)
	}
	sum, mtime, err := fileSumTime(abs)
	if err != nil {
		return err
	}
	k.touched(mtime)
	k.field("file", rel)
	k.field("sha256", sum)
	return nil
}

// fileSum is the hex sha256 of a regular file's content.
func fileSum(name string) (string, error) {
	sum, _, err := fileSumTime(name)
	return sum, err
}

// fileSumTime is fileSum and the file's modification time.
func fileSumTime(name string) (string, time.Time, error) {
	// Stat first: opening a FIFO would block.
	if fi, err := os.Stat(name); err != nil {
		return "", time.Time{}, err
	} else if !fi.Mode().IsRegular() {
		return "", time.Time{}, fmt.Errorf("%s is not a regular file", name)
	}
	f, err := os.Open(name)
	if err != nil {
		return "", time.Time{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", time.Time{}, err
	}
	if !fi.Mode().IsRegular() {
		return "", time.Time{}, fmt.Errorf("%s is not a regular file", name)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", time.Time{}, err
	}
	return hex.EncodeToString(h.Sum(nil)), fi.ModTime(), nil
}

var binaryOnce struct {
	sync.Once
	id  string
	err error
}

// binaryID identifies the running binary: its Go build ID (which ends in a
// hash of the binary's content), read from the ELF note without reading the
// whole file; else the sha256 of the whole file.
func binaryID() (string, error) {
	binaryOnce.Do(func() {
		exe, err := os.Executable()
		if err != nil {
			binaryOnce.err = err
			return
		}
		if id := elfBuildID(exe); id != "" {
			binaryOnce.id = "go-build-id:" + id
			return
		}
		if id := textBuildID(exe); id != "" {
			binaryOnce.id = "go-build-id:" + id
			return
		}
		sum, err := fileSum(exe)
		if err != nil {
			binaryOnce.err = err
			return
		}
		binaryOnce.id = "sha256:" + sum
	})
	return binaryOnce.id, binaryOnce.err
}

// elfBuildID reads the Go build ID from the .note.go.buildid section, or ""
// when there is none (not ELF, or built with an empty build ID).
func elfBuildID(exe string) string {
	f, err := elf.Open(exe)
	if err != nil {
		return ""
	}
	defer f.Close()
	s := f.Section(".note.go.buildid")
	if s == nil {
		return ""
	}
	data, err := s.Data()
	if err != nil || len(data) < 16 {
		return ""
	}
	// An ELF note: namesz, descsz, type (4 bytes each, the file's byte
	// order), the name "Go\0\0", the description (the build ID).
	bo := f.ByteOrder
	namesz, descsz := bo.Uint32(data[0:4]), bo.Uint32(data[4:8])
	if namesz != 4 || !bytes.Equal(data[12:16], []byte("Go\x00\x00")) || descsz == 0 || uint64(len(data)) < 16+uint64(descsz) {
		return ""
	}
	return string(data[16 : 16+descsz])
}

// textBuildID finds the Go build ID where the linker also puts it, at the
// start of the text segment (Mach-O, PE and ELF alike):
// "\xff Go build ID: \"ID\"\n \xff", within the file's first 64 KiB.
func textBuildID(exe string) string {
	f, err := os.Open(exe)
	if err != nil {
		return ""
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	n, _ := io.ReadFull(f, buf)
	buf = buf[:n]
	const start, end = "\xff Go build ID: \"", "\"\n \xff"
	i := bytes.Index(buf, []byte(start))
	if i < 0 {
		return ""
	}
	rest := buf[i+len(start):]
	j := bytes.Index(rest, []byte(end))
	if j <= 0 || j > 1024 {
		return ""
	}
	return string(rest[:j])
}
