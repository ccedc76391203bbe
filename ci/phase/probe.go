package main

import (
	"crypto/sha256"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"

	"golang.org/x/sys/unix"
)

// The machine's speed at what the phases spend their time on, measured at the start of a run and compared with
// the reference machine's (budget.tsv's reference row), so that one budget judges every machine CI runs on: the
// same suites took 160 s of go test on one 2-core machine of this workplace and 906 s on another (2026-12-06), where
// starting a process costs five times as much (a paravirtualised kernel: page tables and interrupts are hypercalls),
// while compiling and evaluating took ~1.3 times as long. A share is the reference machine's time; a phase is
// judged against its share times the factor of what it spends its time on (its scale in budget.tsv). Both probes
// measure CPU time, not wall time, so that another process on the machine changes them little; each is the
// least of five rounds (three spread 151-222 ms for compute on one machine).

// speed is a probe's result: milliseconds of CPU per process started and reaped (Proc), and per unit of
// single-threaded compute (CPU).
type speed struct{ Proc, CPU float64 }

// probeChildEnv makes the phase binary exit at once: the Go half of the process probe.
const probeChildEnv = "PHASE_PROBE_CHILD"

const (
	probeRounds = 5
	probeSpawns = 40 // pairs per round: /bin/sh -c : and a Go binary (this one) that exits at start
)

// probe measures the machine: the least of rounds rounds of each.
func probe(rounds int) (speed, error) {
	self, err := os.Executable()
	if err != nil {
		return speed{}, err
	}
	var procs, cpus []float64
	for range rounds {
		p, err := probeProc(self)
		if err != nil {
			return speed{}, err
		}
		procs = append(procs, p)
		cpus = append(cpus, probeCPU())
	}
	return speed{Proc: slices.Min(procs), CPU: slices.Min(cpus)}, nil
}

// probeProc: CPU ms per process, the children's and this process's kernel time for starting and reaping them.
func probeProc(self string) (float64, error) {
	var c0, s0, c1, s1 unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_CHILDREN, &c0)
	_ = unix.Getrusage(unix.RUSAGE_SELF, &s0)
	for range probeSpawns {
		if err := exec.Command("/bin/sh", "-c", ":").Run(); err != nil {
			return 0, fmt.Errorf("probe: /bin/sh -c : %w", err)
		}
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), probeChildEnv+"=1")
		if err := cmd.Run(); err != nil {
			return 0, fmt.Errorf("probe: %s: %w", self, err)
		}
	}
	_ = unix.Getrusage(unix.RUSAGE_CHILDREN, &c1)
	_ = unix.Getrusage(unix.RUSAGE_SELF, &s1)
	ms := 1000 * (secs(c1.Utime) + secs(c1.Stime) - secs(c0.Utime) - secs(c0.Stime) + secs(s1.Stime) - secs(s0.Stime))
	return ms / (2 * probeSpawns), nil
}

// probeCPU: CPU ms of one thread hashing 32 MiB and filling, sorting and reading a map of 2^18 keys (compiling
// and evaluating are both: arithmetic, and memory that does not fit in the caches).
func probeCPU() float64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// no collection meanwhile: its work lands on other threads at the runtime's whim (the map is ~30 MB)
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	var r0, r1 unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_THREAD, &r0)
	buf := make([]byte, 1<<20)
	h := sha256.New()
	for range 32 {
		h.Write(buf)
	}
	m := map[string]int{}
	keys := make([]string, 0, 1<<18)
	for i := range 1 << 18 {
		k := strconv.Itoa(i * 7919)
		m[k] = i
		keys = append(keys, k)
	}
	sort.Strings(keys)
	sum := 0
	for _, k := range keys {
		sum += m[k]
	}
	_ = unix.Getrusage(unix.RUSAGE_THREAD, &r1)
	if sum < 0 || len(h.Sum(nil)) == 0 {
		panic("unreachable: keeps the work")
	}
	return 1000 * (secs(r1.Utime) + secs(r1.Stime) - secs(r0.Utime) - secs(r0.Stime))
}

func secs(t unix.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

func (s speed) String() string { return fmt.Sprintf("proc %.2f ms, cpu %.0f ms", s.Proc, s.CPU) }

// writeSpeed and readSpeed: the probe's file, "PROC\tCPU".
func writeSpeed(path string, s speed) error {
	return os.WriteFile(path, fmt.Appendf(nil, "%.3f\t%.1f\n", s.Proc, s.CPU), 0o644)
}

func readSpeed(path string) (speed, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return speed{}, err
	}
	var s speed
	if _, err := fmt.Sscanf(string(b), "%g\t%g", &s.Proc, &s.CPU); err != nil || s.Proc <= 0 || s.CPU <= 0 {
		return speed{}, fmt.Errorf("%s: want \"PROC\\tCPU\" (milliseconds, > 0): %q", path, b)
	}
	return s, nil
}

// Factors further from 1 than this are refused as a broken probe: the machines seen differ by five times at most.
const maxFactor = 10

// cpuPerProc relates the two factors on the machines seen: processes 4.9 times dearer came with compute 1.55 times
// slower (4.9^0.28 = 1.56; make test-node against make test and test-heavy on the two kinds, 2026-12-06).
const cpuPerProc = 0.28

// factors is this machine against the reference: how many times longer a process and a unit of compute take.
//
// The compute probe may loosen the budget, never tighten it below what the process probe predicts: it is a
// second-long snapshot of a host whose speed drifts (101 to 217 ms on one machine within hours), and CI's run of
// 2026-12-06 probed 101 ms, scaled the compute shares by 0.62 and then ran test-heavy 24 % slower than the
// reference run it was judged against. The process probe is steadier (5.0 to 6.0 ms there).
func factors(ref, here speed) (proc, cpu float64, err error) {
	proc, cpu = here.Proc/ref.Proc, here.CPU/ref.CPU
	for _, f := range []float64{proc, cpu} {
		if f > maxFactor || f < 1.0/maxFactor {
			return 0, 0, fmt.Errorf("the machine probe (%v) is over %d times off the reference machine's (%v): a broken probe, not a machine", here, maxFactor, ref)
		}
	}
	return proc, max(cpu, math.Pow(proc, cpuPerProc)), nil
}
