package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestFullDisk: generate on a file system that fills up in the middle of
// staging a version bump exits 2, says nothing was changed, and leaves the
// repository exactly as it was (no staging file, every file with its bytes and
// mtime); with space again, one generate writes the bump. The repository sits
// on a small tmpfs, so the test needs root (mount); a filler file takes the
// free space but two pages, so that one staged file fits and the next does
// not.
func TestFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	repo := filepath.Join(mnt, "repo")
	cueDir, err := filepath.Abs("../../cue")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(repo, "cue"), os.DirFS(cueDir)); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	gen := func(want int, args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		// one target: what a full disk does to staging shows on one, at a third of the evaluation
		args = append(args, "--root", repo, "--no-cache", "--target", "kind")
		if got := run(args, strings.NewReader(""), &stdout, &stderr); got != want {
			t.Fatalf("gvisorgen %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), got, want, stdout.String(), stderr.String())
		}
		return stderr.String()
	}
	gen(0, "generate")
	bump := []byte("package gvisorgen\n\n#Values: gvisor: version: \"20250101\"\n")
	if err := os.WriteFile(filepath.Join(repo, "cue", "zz.cue"), bump, 0o644); err != nil {
		t.Fatal(err)
	}
	gen(1, "check")

	// Fill the disk, then free two pages.
	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(fi.Size()&^4095 - 2*4096); err != nil {
		t.Fatal(err)
	}
	f.Close()

	before, err := treeState(mnt)
	if err != nil {
		t.Fatal(err)
	}
	msg := gen(2, "generate")
	t.Logf("generate on a full disk: %s", msg[strings.LastIndex(msg, "gvisorgen: "):])
	for _, want := range []string{"no space left on device", "nothing was changed: the tree is as it was"} {
		if !strings.Contains(msg, want) {
			t.Errorf("generate on a full disk: stderr lacks %q:\n%s", want, msg)
		}
	}
	after, err := treeState(mnt)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(before, after) {
		t.Errorf("the tree changed on a failed generate:\n%s", stateDiff(before, after))
	}
	gen(1, "check")

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	gen(0, "generate")
	gen(0, "check")
	repaired, err := treeState(mnt)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range repaired {
		if strings.Contains(l, ".gvisorgen-") {
			t.Errorf("staging file left: %s", l)
		}
	}
}
