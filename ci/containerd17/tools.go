//go:build tools

// Package containerd17 only pins containerd 1.7's daemon for go mod tidy.
package containerd17

import (
	_ "github.com/containerd/containerd/cmd/containerd"
	_ "github.com/containerd/containerd/cmd/containerd-shim-runc-v2"
)
