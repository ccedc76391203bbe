package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// keepGC puts the process's collector settings and gcMemLimit back when the test ends, and starts it at Go's defaults.
func keepGC(t *testing.T) {
	pct0 := debug.SetGCPercent(100)
	lim0 := debug.SetMemoryLimit(math.MaxInt64)
	limit0 := gcMemLimit
	t.Cleanup(func() { debug.SetGCPercent(pct0); debug.SetMemoryLimit(lim0); gcMemLimit = limit0 })
}

// TestTuneGC: the collector's settings apply unless the user set GOGC or GOMEMLIMIT; either leaves both to Go.
func TestTuneGC(t *testing.T) {
	keepGC(t)
	for _, c := range []struct {
		name, gogc, memlimit string
		pct                  int
		limit                int64
	}{
		{"neither set", "", "", gcPercent, gcMemLimit},
		{"GOGC set", "50", "", 100, math.MaxInt64},
		{"GOMEMLIMIT set", "", "1GiB", 100, math.MaxInt64},
		{"both set", "50", "1GiB", 100, math.MaxInt64},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The runtime read the variables at start; what tuneGC must not override is the process's state then,
			// here Go's defaults.
			debug.SetGCPercent(100)
			debug.SetMemoryLimit(math.MaxInt64)
			t.Setenv("GOGC", c.gogc)
			t.Setenv("GOMEMLIMIT", c.memlimit)
			tuneGC()
			if got := debug.SetGCPercent(100); got != c.pct {
				t.Errorf("GC percent %d, want %d", got, c.pct)
			}
			if got := debug.SetMemoryLimit(-1); got != c.limit {
				t.Errorf("memory limit %d, want %d", got, c.limit)
			}
		})
	}
}

// TestTuneGCFallsBack: a live heap over 3/4 of the limit hands the collector back to Go's defaults after the next
// collection (a fleet that outgrows the limit must not have the collector run without pause).
func TestTuneGCFallsBack(t *testing.T) {
	keepGC(t)
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	gcMemLimit = 64 << 20
	tuneGC()
	if got := debug.SetMemoryLimit(-1); got != gcMemLimit {
		t.Fatalf("memory limit %d, want %d", got, gcMemLimit)
	}
	live := make([][]byte, 0, 64)
	for range 56 { // 56 MiB live: over 3/4 of 64
		live = append(live, make([]byte, 1<<20))
	}
	deadline := time.Now().Add(10 * time.Second)
	for debug.SetMemoryLimit(-1) != math.MaxInt64 {
		if time.Now().After(deadline) {
			t.Fatalf("a live heap of %d MiB over 3/4 of the limit: still limited after 10 s", len(live))
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GC percent %d after the fallback, want Go's default 100", got)
	}
	runtime.KeepAlive(live)
}
