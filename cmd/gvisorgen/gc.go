package main

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// The collector's settings for a run of gvisorgen, unless the user set GOGC or GOMEMLIMIT. The CUE evaluator
// allocates much short-lived memory: with Go's default (GOGC=100) a run spends about a fifth of its CPU collecting it.
// GOGC=200 under a soft limit of 240 MiB, measured on the fast kind of 2-core machine (2026-12-07, `generate
// --no-cache`, a tree already written; CPU s, peak RSS MB): the six example targets 0.72 -> 0.58, 101 -> 117; 1000
// targets 13.9 -> 12.0, 216 -> 275 (BENCHMARKS.md holds them under 300); 4000 targets 55 -> 60, 346 -> 283 (the
// limit, not GOGC, paces the collector there: more CPU, less memory); make test-heavy 186 -> 158 s of wall. Without
// the limit GOGC=200 took 1000 targets to 311 MB and 4000 to 564; GOGC=400 under 200 MiB made 4000 targets 31 %
// slower; 256 MiB left 1000 targets at 285-296 MB.
const gcPercent = 200

// gcMemLimit is a var: the test of the fallback sets a small one.
var gcMemLimit int64 = 240 << 20

// tuneGC applies them, once, at the start of the process; a user who set either variable keeps Go's handling of both.
// A fleet whose live heap nears the limit (some 5,500 targets: ~27 MB, plus ~28 KB a target) would have the collector
// run almost without pause: after any collection that finds the live heap over 3/4 of the limit, the rest of the run
// has Go's defaults (watchHeap).
func tuneGC() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetGCPercent(gcPercent)
	debug.SetMemoryLimit(gcMemLimit)
	watchHeap(func() {
		debug.SetGCPercent(100)
		debug.SetMemoryLimit(math.MaxInt64)
	})
}

// sentinel is garbage whose finalizer runs after the collection that frees it (a pointer field keeps it out of the
// tiny allocator, whose objects may never be finalized).
type sentinel struct{ _ *byte }

// watchHeap calls untune once, after the first collection that leaves a live heap over 3/4 of gcMemLimit.
func watchHeap(untune func()) {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	var check func(*sentinel)
	check = func(*sentinel) {
		metrics.Read(s)
		if s[0].Value.Kind() == metrics.KindUint64 && s[0].Value.Uint64() > uint64(gcMemLimit)/4*3 {
			untune()
			return
		}
		runtime.SetFinalizer(&sentinel{}, check)
	}
	runtime.SetFinalizer(&sentinel{}, check)
}

// mainExit is the process's whole life: tuned, run, exited with run's code (main, and the test binary when it is
// gvisorgen).
func mainExit() {
	tuneGC()
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
