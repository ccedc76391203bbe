//go:build linux

// Command hostexec is the node tests' HOST_EXEC: it runs a command "on the fake host" as nsenter -t 1 -m would on a
// node. The tests link it under the name of the wrapper into a fake host's folder D (D/hostexec, D/hostexec-net,
// D/mount-only): in a private mount namespace, D/host's etc/containerd, usr/local/bin, run and home are bound over
// the machine's, D/fakebin over /usr/local/sbin (the fake systemctl and the chosen containerd come first on PATH),
// then the command is executed. "hostexec-net" keeps the machine's network (the test servers on 127.0.0.1) and runs
// curl only; every other name gets a new, empty network namespace, and "hostexec" refuses curl, which needs the
// network. Each run logs "<name> <command>" to D/hostexec.log.
//
// It was a shell script around unshare(1) and five mount(1) calls: some 30 ms of CPU per host command, thousands of
// them per suite. The same system calls from one static program cost a few milliseconds.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
)

// Namespaces belong to the thread that unshares them: keep main on one thread until it execs.
func init() { runtime.LockOSThread() }

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", filepath.Base(os.Args[0]), err)
		os.Exit(97)
	}
}

func run() error {
	self := os.Args[0]
	if !filepath.IsAbs(self) {
		return fmt.Errorf("run me by my absolute path (the fake host is the folder I am in), not %q", self)
	}
	dir, me := filepath.Dir(self), filepath.Base(self)
	args := os.Args[1:]
	if len(args) == 0 {
		return fmt.Errorf("no command")
	}
	// The command's name, past env and VAR=value words (as the scripts' "$GVZ_HX env PATH=... cmd" calls).
	c := ""
	for _, a := range args {
		if a == "env" || strings.Contains(a, "=") {
			continue
		}
		c = filepath.Base(a)
		break
	}
	if err := appendLine(filepath.Join(dir, "hostexec.log"), me+" "+c+"\n"); err != nil {
		return err
	}
	switch {
	case me == "hostexec" && c == "curl":
		fmt.Fprintln(os.Stderr, "hostexec: curl must run through HOST_EXEC_NET (it needs the host's network)")
		os.Exit(97)
	case me == "hostexec-net" && c != "curl":
		fmt.Fprintf(os.Stderr, "hostexec-net: only curl may run through HOST_EXEC_NET, not %s\n", c)
		os.Exit(97)
	}
	flags := syscall.CLONE_NEWNS
	if me != "hostexec-net" {
		flags |= syscall.CLONE_NEWNET
	}
	if err := syscall.Unshare(flags); err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making / private: %w", err)
	}
	h := filepath.Join(dir, "host")
	binds := [][2]string{
		{h + "/etc/containerd", "/etc/containerd"},
		{h + "/usr/local/bin", "/usr/local/bin"},
		{h + "/run", "/run"},
		{h + "/home", "/home"},
		{dir + "/fakebin", "/usr/local/sbin"},
	}
	// a k3s or RKE2 node's folders, when the fake host has them (the mount point is made on the machine: empty)
	if _, err := os.Stat(h + "/var/lib/rancher"); err == nil {
		if err := os.MkdirAll("/var/lib/rancher", 0o755); err != nil {
			return err
		}
		binds = append(binds, [2]string{h + "/var/lib/rancher", "/var/lib/rancher"})
	}
	for _, m := range binds {
		if err := syscall.Mount(m[0], m[1], "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("binding %s over %s: %w", m[0], m[1], err)
		}
	}
	if err := os.Setenv("PATH", dir+"/fakebin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"); err != nil {
		return err
	}
	bin, err := exec.LookPath(args[0])
	if err != nil {
		return err
	}
	return syscall.Exec(bin, args, os.Environ())
}

func appendLine(name, line string) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
