package main

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"
)

// treeState lists every path under dir without following a symbolic link:
// its mode, the target of a link, and for a regular file its size, mtime and
// sha256. Folders named .cache (the cache of fresh trees, which a run may
// write) are skipped. Folder mtimes are not listed: a run that stages a file
// and removes it again has written nothing that stays.
func treeState(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() && d.Name() == ".cache" {
			return filepath.SkipDir
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %v", rel, info.Mode())
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			line += " -> " + target
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %d %d %x", info.Size(), info.ModTime().UnixNano(), sha256.Sum256(b))
		}
		out = append(out, line)
		return nil
	})
	return out, err
}

// treehash save NAME DIR | treehash same NAME DIR: records the state of a
// whole folder (treeState) and later asserts that it is the same, listing
// what differs. `! treehash same` asserts that something changed. The record
// is kept under $WORK/.cache, which treeState skips.
func treehash(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 3 || (args[0] != "save" && args[0] != "same") {
		ts.Fatalf("usage: treehash save|same NAME DIR")
	}
	state, err := treeState(ts.MkAbs(args[2]))
	if err != nil {
		ts.Fatalf("treehash: %v", err)
	}
	file := filepath.Join(ts.Getenv("WORK"), ".cache", "treehash-"+args[1])
	if args[0] == "save" {
		if neg {
			ts.Fatalf("usage: treehash save cannot be negated")
		}
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			ts.Fatalf("%v", err)
		}
		if err := os.WriteFile(file, []byte(strings.Join(state, "\n")), 0o644); err != nil {
			ts.Fatalf("%v", err)
		}
		return
	}
	b, err := os.ReadFile(file)
	if err != nil {
		ts.Fatalf("treehash: no saved state %s: %v", args[1], err)
	}
	old := strings.Split(string(b), "\n")
	if same := slices.Equal(old, state); same == neg {
		if neg {
			ts.Fatalf("treehash: %s unchanged since %s, want a change", args[2], args[1])
		}
		ts.Fatalf("treehash: %s changed since %s:\n%s", args[2], args[1], stateDiff(old, state))
	}
}

// stateDiff lists the lines only in a (-) or only in b (+).
func stateDiff(a, b []string) string {
	var out []string
	for _, l := range a {
		if !slices.Contains(b, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range b {
		if !slices.Contains(a, l) {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}

// immutable on|off DIR sets or clears the immutable attribute (chattr +i) of
// a folder, so that nothing can be created, renamed or removed in it. Scripts
// guard it with [root] and [chattr]. A script that fails with the attribute
// set still has it cleared, so that its work folder can be removed.
func immutable(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 || (args[0] != "on" && args[0] != "off") {
		ts.Fatalf("usage: immutable on|off DIR")
	}
	dir := ts.MkAbs(args[1])
	flag := map[string]string{"on": "+i", "off": "-i"}[args[0]]
	if out, err := exec.Command("chattr", flag, dir).CombinedOutput(); err != nil {
		ts.Fatalf("chattr %s %s: %v: %s", flag, args[1], err, out)
	}
	if args[0] == "on" {
		ts.Defer(func() { exec.Command("chattr", "-i", dir).Run() })
	}
}

// chattrWorks reports whether chattr +i works on a folder of the file system
// that holds the scripts' work folders (not on tmpfs or overlayfs, nor
// without root or e2fsprogs).
func chattrWorks() bool {
	dir, err := os.MkdirTemp("", "gvisorgen-chattr-")
	if err != nil {
		return false
	}
	defer os.RemoveAll(dir)
	if exec.Command("chattr", "+i", dir).Run() != nil {
		return false
	}
	return exec.Command("chattr", "-i", dir).Run() == nil
}
