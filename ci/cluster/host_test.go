//go:build clustertest

package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// hostPaths are the machine's paths the nodes bind scratch folders over (they must stay as they are) and paths that
// must not appear (they would be a node's writes leaking out of its private mounts).
var hostPaths = []string{"/etc/containerd", "/usr/local/bin", "/usr/local/sbin", "/usr/bin/systemctl", "/usr/bin/runsc",
	"/usr/bin/containerd", "/etc/cni", "/var/lib/cni", "/opt/containerd", "/var/lib/containerd", "/var/lib/kubelet",
	"/etc/kubernetes", "/home/kubernetes", "/run/gvisorgen", "/run/containerd", "/usr/libexec/kubernetes",
	"/var/log/pods", "/var/log/containers"}

// hostManifest lists every entry under hostPaths (type, mode, size, mtime, symlink target; the sha256 of regular
// files), staying on each path's file system, sorted: equal before and after means nothing of the machine changed.
func hostManifest() string {
	var lines []string
	for _, root := range hostPaths {
		fi, err := os.Lstat(root)
		if err != nil {
			lines = append(lines, "absent "+root)
			continue
		}
		dev := fi.Sys().(*syscall.Stat_t).Dev
		filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				lines = append(lines, fmt.Sprintf("%s error %v", p, err))
				return nil
			}
			fi, err := e.Info()
			if err != nil {
				lines = append(lines, fmt.Sprintf("%s error %v", p, err))
				return nil
			}
			st := fi.Sys().(*syscall.Stat_t)
			l := fmt.Sprintf("%s %s %o %d %d.%09d", p, fi.Mode().Type(), fi.Mode().Perm(), fi.Size(), st.Mtim.Sec, st.Mtim.Nsec)
			switch {
			case fi.Mode()&fs.ModeSymlink != 0:
				target, _ := os.Readlink(p)
				l += " -> " + target
			case fi.Mode().IsRegular():
				l += " sha256:" + fileSHA256(p)
			case fi.IsDir() && st.Dev != dev:
				lines = append(lines, l)
				return fs.SkipDir // another file system mounted here (find -xdev)
			}
			lines = append(lines, l)
			return nil
		})
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

func fileSHA256(p string) string {
	f, err := os.Open(p)
	if err != nil {
		return "error " + err.Error()
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "error " + err.Error()
	}
	return hex.EncodeToString(h.Sum(nil))
}

// lineDiff lists the lines only in a ("- ") and only in b ("+ "), at most n.
func lineDiff(a, b string, n int) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	ma, mb := in(a), in(b)
	var out []string
	for _, l := range strings.Split(a, "\n") {
		if !mb[l] {
			out = append(out, "- "+l)
		}
	}
	for _, l := range strings.Split(b, "\n") {
		if !ma[l] {
			out = append(out, "+ "+l)
		}
	}
	if len(out) > n {
		out = append(out[:n], "…")
	}
	return strings.Join(out, "\n")
}
