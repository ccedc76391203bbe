//go:build nodetest

package node

import (
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestReadyHashesOnlyWhatChanged: the readiness probe runs every 30 s (the default period) on every node; hashing the release each time
// (~200 MB for an archive release) costs a node a few per cent of a core for ever. install-runsc records each current
// file's identity on disk ("seen" lines: device, inode, size, mtime, ctime) before it hashes the installed files, and
// ready.sh hashes a file again only when that identity changed. The probe's verdict must not change: a write that
// keeps the size and puts the mtime back is still caught (its ctime moved), a touch that keeps the bytes stays Ready,
// and a stamp from before the "seen" lines (an older installer) gets every file hashed, as before.
func TestReadyHashesOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	h := newHost(t, "24")
	h.setConfig(def24())
	h.startContainerd()
	h.mustRun("install-runsc.sh", nil)
	h.mustRun("configure-containerd.sh", nil)

	stampPath := idir + "/.gvisorgen-runsc.stamp"
	var current, seen []string // the stamp's current files (the probe's), and the paths of its "seen" lines
	for _, l := range strings.Split(h.read(stampPath), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 3 && f[0] == "file" && (strings.HasPrefix(f[2], "gvisor-releases/"+tagBin+"/") || !strings.Contains(f[2], "/")):
			current = append(current, f[2])
		case len(f) == 11 && f[0] == "seen":
			seen = append(seen, f[1])
		}
	}
	slices.Sort(current)
	slices.Sort(seen)
	if len(current) < 4 || !slices.Equal(current, seen) {
		t.Fatalf("the stamp's seen lines %v are not its current files %v:\n%s", seen, current, h.read(stampPath))
	}

	// What the probe opens in the install dir (inotify: test -f/-x and stat do not open a file, hashing does). busybox
	// sh runs its applets without a PATH lookup, so a logging sha512sum on PATH would not see them.
	opened := watchOpens(t, h.P(idir), h.P(idir+"/gvisor-releases/"+tagBin))
	probe := func() []string { // a Ready probe: what it hashed
		t.Helper()
		_ = opened() // the test's own writes
		h.mustRun("ready.sh", nil)
		return opened()
	}
	if got := probe(); len(got) != 0 {
		t.Fatalf("the probe hashed installed files that did not change: %v", got)
	}

	// Same bytes, new times (a backup tool, a touch): hashed, and still Ready.
	runsc := "gvisor-releases/" + tagBin + "/runsc"
	now := time.Now()
	if err := os.Chtimes(h.P(idir+"/"+runsc), now, now); err != nil {
		t.Fatal(err)
	}
	if got := probe(); !slices.Equal(got, []string{runsc}) {
		t.Fatalf("after a touch of %s the probe hashed %v, want just it", runsc, got)
	}

	// Other bytes of the same size, the mtime put back: the ctime moved, so it is hashed and refused.
	shim := h.P(idir + "/containerd-shim-runsc-v1")
	fi, err := os.Stat(shim)
	if err != nil {
		t.Fatal(err)
	}
	orig, _ := os.ReadFile(shim)
	flipped := []byte(string(orig))
	flipped[len(flipped)/2] ^= 0xff
	h.write(shim, 0o755, string(flipped))
	if err := os.Chtimes(shim, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if fi2, _ := os.Stat(shim); fi2.Size() != fi.Size() || !fi2.ModTime().Equal(fi.ModTime()) {
		t.Fatalf("the test's rewrite changed size or mtime: %v %v -> %v %v", fi.Size(), fi.ModTime(), fi2.Size(), fi2.ModTime())
	}
	h.mustFail("ready.sh", nil, "containerd-shim-runsc-v1 no longer has the sha512 the stamp records")
	h.write(shim, 0o755, string(orig))
	if got := probe(); !slices.Equal(got, []string{"containerd-shim-runsc-v1", runsc}) {
		t.Fatalf("with the shim's bytes back the probe hashed %v, want it and the touched %s (hashed on every probe since)", got, runsc)
	}

	// A stamp written before install-runsc recorded identities: every current file hashed, and Ready.
	var old []string
	for _, l := range strings.Split(h.read(stampPath), "\n") {
		if !strings.HasPrefix(l, "seen ") {
			old = append(old, l)
		}
	}
	h.write(h.P(stampPath), 0o644, strings.Join(old, "\n"))
	if got := probe(); !slices.Equal(got, current) {
		t.Fatalf("with a stamp without seen lines the probe hashed %v, want every current file %v", got, current)
	}

	// The next install-runsc on the node (the same release: nothing to install, as on a pod restart after gvisorgen
	// itself was upgraded, or after a reboot that renumbered the disk) records them, and the run after it writes
	// nothing.
	r := h.mustRun("install-runsc.sh", nil)
	assertContains(t, "output", r.Output, "recorded the installed files' identities on disk")
	if got := probe(); len(got) != 0 {
		t.Fatalf("after install-runsc recorded the identities the probe hashed %v", got)
	}
	st := h.read(stampPath)
	if r := h.mustRun("install-runsc.sh", nil); strings.Contains(r.Output, "recorded") || h.read(stampPath) != st {
		t.Fatalf("a run on an unchanged node rewrote the stamp:\n%s", r.Output)
	}

	// A reinstall of the same release (its shim changed) records them again.
	h.write(shim, 0o755, string(flipped))
	h.mustRun("install-runsc.sh", nil)
	if got := probe(); len(got) != 0 {
		t.Fatalf("after a reinstall the probe hashed %v", got)
	}
}

// watchOpens watches dirs for files opened in them (not their subfolders) and returns a function that drains the
// events so far: the opened paths relative to the first dir, sorted, each once.
func watchOpens(t *testing.T, dirs ...string) func() []string {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Close(fd) })
	wd := map[int32]string{}
	for _, d := range dirs {
		w, err := unix.InotifyAddWatch(fd, d, unix.IN_OPEN)
		if err != nil {
			t.Fatalf("inotify %s: %v", d, err)
		}
		rel, _ := filepath.Rel(dirs[0], d)
		wd[int32(w)] = rel
	}
	return func() []string {
		seen := map[string]bool{}
		buf := make([]byte, 64<<10)
		for {
			n, err := unix.Read(fd, buf)
			if errors.Is(err, unix.EAGAIN) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)]), "\x00")
				off += unix.SizeofInotifyEvent + int(ev.Len)
				if name == "" || ev.Mask&unix.IN_ISDIR != 0 {
					continue
				}
				seen[filepath.Join(wd[ev.Wd], name)] = true
			}
		}
		var out []string
		for p := range seen {
			if !strings.HasPrefix(filepath.Base(p), ".") { // the stamp and install records: read, not hashed
				out = append(out, p)
			}
		}
		slices.Sort(out)
		return out
	}
}

// TestInstallHashesEachFileOnce: a fresh install hashes each file of the release once before it installs it (the
// verified download itself where the layout installs it as is, each file staged from an archive) and then the
// installed files once (sha512sum -c, just before the stamp). A release is ~200 MB, and each pass of busybox's
// sha512 over it is seconds of CPU on a small node: staging used to copy the verified binaries and hash them again,
// and the shim a third time.
func TestInstallHashesEachFileOnce(t *testing.T) {
	t.Parallel()
	for _, tag := range []string{tagBin, tagArch} {
		t.Run(tag, func(t *testing.T) {
			t.Parallel()
			h := newHost(t, "24")
			calls := filepath.Join(h.Dir, "calls")
			cmd := h.hookedCmd("install-runsc.sh", map[string]string{"GVISOR_VERSION": tag}, "GVZT_CALLS="+calls)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("install-runsc: %v\n%s", err, out)
			}
			b, err := os.ReadFile(calls)
			if err != nil {
				t.Fatal(err)
			}
			hashed, checks := map[string]int{}, 0
			for _, l := range strings.Split(string(b), "\n") {
				f := strings.Fields(l)
				switch {
				case len(f) < 2 || f[0] != "sha512sum":
				case f[1] == "-c":
					checks++
				default:
					hashed[filepath.Base(f[len(f)-1])]++
				}
			}
			for _, name := range []string{"runsc", "containerd-shim-runsc-v1"} {
				if hashed[name] != 1 {
					t.Errorf("%s hashed %d times before it was installed, want once", name, hashed[name])
				}
			}
			for name, n := range hashed {
				if n > 1 && name != "runsc" && name != "containerd-shim-runsc-v1" {
					t.Errorf("%s hashed %d times before it was installed, want once", name, n)
				}
			}
			if checks != 1 {
				t.Errorf("the installed files were checked %d times (sha512sum -c), want once", checks)
			}
			t.Logf("hashed before install: %v; installed files checked %d time(s)", hashed, checks)
			// what the stamp records verifies on disk, as without the hook
			for _, l := range strings.Split(h.read(idir+"/.gvisorgen-runsc.stamp"), "\n") {
				f := strings.Fields(l)
				if len(f) != 3 || f[0] != "file" {
					continue
				}
				data, err := os.ReadFile(h.P(idir + "/" + f[2]))
				if err != nil {
					t.Fatal(err)
				}
				if sum := sha512.Sum512(data); hex.EncodeToString(sum[:]) != f[1] {
					t.Errorf("the stamp records %s for %s, which hashes to %x", f[1], f[2], sum)
				}
			}
		})
	}
}
