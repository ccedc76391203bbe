//go:build nodetest

package node

import "syscall"

var syscallZero = syscall.Signal(0)
