// Command phase runs and judges the phases of .ci/run against their time
// budget (ci/phase/budget.tsv, the one home of every phase's share).
//
//	phase run -results FILE -id ID [-cold] -- CMD ARGS...
//	phase probe -out FILE
//	phase report -results FILE [-budget ci/phase/budget.tsv] [-probe FILE]
//	phase together [-jobs N|all|auto] NAME=COMMAND NAME=COMMAND...
//
// probe measures the machine (probe.go), so that report scales the shares, measured on the reference machine, to it.
// run executes one phase and appends what it measured to FILE: the wall
// time, the CPU time of the phase's own processes (orphans included: the
// runner is their subreaper) and the CPU time everything else on the machine
// used meanwhile. report prints each phase against its share and exits 1 when
// the total, corrected for that foreign load, exceeds the budget by more than
// the margin (budget.go says which and why). together runs suites side by
// side as one phase (together.go), as many at once as -jobs allows (jobs.go:
// auto runs all where processes are cheap, one per core where they are dear).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

func main() {
	if os.Getenv(probeChildEnv) != "" {
		return // the probe's Go process: started, and gone
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: phase run|report ...")
		return 2
	}
	switch args[0] {
	case "run":
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		results := fs.String("results", "", "file the measurement is appended to")
		id := fs.String("id", "", "the phase's id in the budget")
		cold := fs.Bool("cold", false, "the phase's caches were empty: judge it by its cold share")
		var watch dirList
		fs.Var(&watch, "watch", "a cache folder: an entry that appears in it during the phase (something built and cached) makes the phase cold; repeatable")
		if err := fs.Parse(args[1:]); err != nil {
			return 2
		}
		if *results == "" || *id == "" || fs.NArg() == 0 {
			fmt.Fprintln(stderr, "usage: phase run -results FILE -id ID [-cold] -- CMD ARGS...")
			return 2
		}
		before := watch.entries()
		m, code, err := measure(*id, *cold, fs.Args())
		if err != nil {
			fmt.Fprintf(stderr, "phase %s: %v\n", *id, err)
			return 2
		}
		if len(m.Left) > 0 {
			fmt.Fprintf(stdout, "::: %s: left running, ended (SIGTERM, then SIGKILL): %s\n", *id, strings.Join(m.Left, " "))
		}
		if len(m.Stuck) > 0 {
			fmt.Fprintf(stdout, "::: %s: left running, not ended even by SIGKILL: %s\n", *id, strings.Join(m.Stuck, " "))
		}
		if built := watch.added(before); len(built) > 0 {
			m.Cold = true
			fmt.Fprintf(stdout, "::: %s: cold (built and cached: %s)\n", *id, strings.Join(built, ", "))
		}
		if err := appendResult(*results, m); err != nil {
			fmt.Fprintf(stderr, "phase %s: %v\n", *id, err)
			return 2
		}
		fmt.Fprintf(stdout, "::: %s: %s\n", *id, m.summary())
		return code
	case "report":
		fs := flag.NewFlagSet("report", flag.ContinueOnError)
		results := fs.String("results", "", "the file phase run appended to")
		budget := fs.String("budget", "ci/phase/budget.tsv", "the budget")
		speedFile := fs.String("probe", "", "the file phase probe wrote: the shares are scaled to this machine (none: judged as the reference machine)")
		if err := fs.Parse(args[1:]); err != nil {
			return 2
		}
		var here *speed
		if *speedFile != "" {
			s, err := readSpeed(*speedFile)
			if err != nil {
				fmt.Fprintln(stderr, "phase report:", err)
				return 2
			}
			here = &s
		}
		b, err := loadBudget(*budget)
		if err != nil {
			fmt.Fprintln(stderr, "phase report:", err)
			return 2
		}
		ms, err := loadResults(*results)
		if err != nil {
			fmt.Fprintln(stderr, "phase report:", err)
			return 2
		}
		err = report(stdout, b, ms, here)
		var over *overBudget
		if errors.As(err, &over) {
			fmt.Fprintln(stderr, "phase report:", err)
			return 1
		}
		if err != nil {
			fmt.Fprintln(stderr, "phase report:", err)
			return 2
		}
		return 0
	case "probe":
		fs := flag.NewFlagSet("probe", flag.ContinueOnError)
		out := fs.String("out", "", "file the machine's speed is written to")
		if err := fs.Parse(args[1:]); err != nil || *out == "" {
			fmt.Fprintln(stderr, "usage: phase probe -out FILE")
			return 2
		}
		s, err := probe(probeRounds)
		if err == nil {
			err = writeSpeed(*out, s)
		}
		if err != nil {
			fmt.Fprintln(stderr, "phase probe:", err)
			return 2
		}
		fmt.Fprintf(stdout, "::: machine probe: %v\n", s)
		return 0
	case "together":
		code, err := together(args[1:], stdout)
		if err != nil {
			fmt.Fprintln(stderr, "phase together:", err)
		}
		return code
	}
	fmt.Fprintf(stderr, "phase: unknown command %q\n", args[0])
	return 2
}

// dirList is the -watch folders.
type dirList []string

func (d *dirList) String() string     { return strings.Join(*d, ",") }
func (d *dirList) Set(v string) error { *d = append(*d, v); return nil }

// entries is every visible entry of the folders (a missing folder has none;
// hidden ones are the builds' temp folders).
func (d dirList) entries() map[string]bool {
	seen := map[string]bool{}
	for _, dir := range d {
		es, _ := os.ReadDir(dir)
		for _, e := range es {
			if !strings.HasPrefix(e.Name(), ".") {
				seen[filepath.Join(dir, e.Name())] = true
			}
		}
	}
	return seen
}

func (d dirList) added(before map[string]bool) []string {
	var out []string
	for p := range d.entries() {
		if !before[p] {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}
