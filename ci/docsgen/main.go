// Command docsgen prints the values reference (docs/values.md) generated from
// the CUE values schema; `make docs` runs it.
package main

import (
	"fmt"
	"os"

	"github.com/gvisorgen/gvisorgen/internal/docs"
	"github.com/gvisorgen/gvisorgen/internal/eval"
)

func main() {
	ev, err := eval.Load(eval.Options{Root: "."})
	if err != nil {
		fmt.Fprintf(os.Stderr, "docsgen: %v\n", err)
		os.Exit(1)
	}
	if err := docs.Reference(os.Stdout, ev.Schema(), ev.Profiles(), ev.Instance()); err != nil {
		fmt.Fprintf(os.Stderr, "docsgen: %v\n", err)
		os.Exit(1)
	}
}
