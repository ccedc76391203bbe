//go:build linux

// Command usernsrun runs a command in new user, mount, pid, net, uts and ipc namespaces with uids/gids 0..65535 mapped 1:1, written
// directly by the root parent (no newuidmap/subuid needed). The node end-to-end test (ci/node/e2e.sh) uses it to give
// the simulated node the capabilities containerd's shims need here (CAP_SYS_RESOURCE is withheld from the machine).
package main

import (
	"os"
	"os/exec"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		os.Stderr.WriteString("usage: usernsrun CMD [ARG...]\n")
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 65536}}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET | syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC,
		UidMappings: m, GidMappings: m, GidMappingsEnableSetgroups: true,
	}
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			os.Exit(ee.ExitCode())
		}
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
}
