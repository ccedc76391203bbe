package main

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
)

// cheapProcMs is where `together -jobs auto` stops running every suite at once: above it (a process costs that many
// ms of CPU, the probe's measure), the suites are CPU-bound and run one per core. Measured on the two kinds of 2-core
// machine here, make e2e-together's four cluster suites: where a process costs ~1.1 ms, all four at once took 446 s
// (they mostly wait: 1.6 of the 2 cores busy), and two at a time would take at least ~460 s (their times alone,
// 2026-12-06); where one costs 5-6 ms, four at once took 930-1224 s of wall and 1,800-2,300 s of CPU (each suite's
// clusters idle three times as long), two at a time 833 s and 1,410 s of CPU (2026-12-07). The threshold sits
// between the two kinds (their geometric mean).
const cheapProcMs = 2.5

// jobsLimit is how many of total jobs run at once for -jobs v ("all", a number, or "auto": all where processes are
// cheap, one per core where they are not), and why, for the log.
func jobsLimit(v string, total int) (int, string, error) {
	switch v {
	case "all":
		return total, "all", nil
	case "auto":
		ms, err := procCost()
		if err != nil {
			return 0, "", fmt.Errorf("-jobs auto: probing the cost of a process: %w", err)
		}
		return autoJobs(ms, numCPU(), total)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, "", fmt.Errorf("-jobs %q: want all, auto or a number of at least 1", v)
	}
	return min(n, total), "-jobs " + v, nil
}

// autoJobs: -jobs auto's choice for a machine where a process costs procMs of CPU and that has cpus cores.
func autoJobs(procMs float64, cpus, total int) (int, string, error) {
	if procMs <= cheapProcMs {
		return total, fmt.Sprintf("a process costs %.2f ms of CPU here, at most %.1f: all at once", procMs, cheapProcMs), nil
	}
	n := min(max(cpus, 1), total)
	return n, fmt.Sprintf("a process costs %.2f ms of CPU here, over %.1f: one at a time per core, %d cores", procMs, cheapProcMs, cpus), nil
}

// numCPU is the machine's cores (a var: tests stub it).
var numCPU = runtime.NumCPU

// procCost is the CPU ms a process costs on this machine: the least of two rounds of the probe's (a var: tests
// stub it, the probe being seconds of work on a slow machine).
var procCost = func() (float64, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	var ms []float64
	for range 2 {
		p, err := probeProc(self)
		if err != nil {
			return 0, err
		}
		ms = append(ms, p)
	}
	return slices.Min(ms), nil
}
