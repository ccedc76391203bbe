package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// measurement is one phase's run.
type measurement struct {
	ID   string
	Cold bool
	// Wall is the phase's elapsed time; CPU the user+system time of its
	// processes; Foreign the CPU time the rest of the machine used meanwhile
	// (another build, a leftover daemon, the hypervisor's steal). All seconds.
	Wall, CPU, Foreign float64
	// CPUs is the machine's processor count.
	CPUs int
	Exit int
	// Left: what the phase left running when its command exited, ended by the runner; Stuck: those of them not even
	// SIGKILL ended ("comm[pid]").
	Left, Stuck []string
}

// Adjusted is the wall time the phase would have taken alone: the machine's
// processors were busy with other work for Foreign/CPUs of it. A CPU-bound
// phase sharing two processors with one other CPU-bound process takes twice
// its time, while that process uses one processor throughout: the
// correction gives the phase's own time back. For a phase that mostly
// waits, it over-corrects, in the lenient direction: a loaded machine must
// not fail a good run; a quiet one is judged by its wall time.
func (m measurement) Adjusted() float64 {
	if m.CPUs <= 0 || m.Foreign <= 0 {
		return m.Wall
	}
	a := m.Wall - m.Foreign/float64(m.CPUs)
	// Never below the phase's own CPU time spread over every processor.
	if floor := m.CPU / float64(m.CPUs); a < floor {
		a = floor
	}
	return a
}

func (m measurement) summary() string {
	return fmt.Sprintf("%.0fs (cpu %.0fs, %.0f%% of %d cores; others used %.0fs cpu meanwhile, alone ~%.0fs)",
		m.Wall, m.CPU, 100*m.CPU/(m.Wall*float64(max(m.CPUs, 1))+1e-9), m.CPUs, m.Foreign, m.Adjusted())
}

// cpuStat reads the machine's busy time (every state but idle and iowait,
// steal included) from /proc/stat, in seconds, and its processor count.
func cpuStat() (busy float64, cpus int, err error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || !strings.HasPrefix(fields[0], "cpu") {
			continue
		}
		if fields[0] != "cpu" {
			cpus++
			continue
		}
		// user nice system idle iowait irq softirq steal (guest time is
		// already counted in user).
		for i, v := range fields[1:] {
			if i >= 8 {
				break
			}
			if i == 3 || i == 4 {
				continue
			}
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("/proc/stat: %q: %w", sc.Text(), err)
			}
			// USER_HZ is 100 on every Linux ABI.
			busy += float64(n) / 100
		}
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	if cpus == 0 {
		return 0, 0, errors.New("/proc/stat lists no processor")
	}
	return busy, cpus, nil
}

// measure runs argv as the phase id. The runner becomes the subreaper of
// everything the phase starts, so that the CPU time of a daemon the phase
// forked (containerd, a kubelet, an API server) and reaped only when it
// stopped counts as the phase's own, not as foreign load. It returns the
// phase's exit code (128+signal when killed).
func measure(id string, cold bool, argv []string) (measurement, int, error) {
	m := measurement{ID: id, Cold: cold}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return m, 0, fmt.Errorf("becoming a subreaper: %w", err)
	}
	busy0, cpus, err := cpuStat()
	if err != nil {
		return m, 0, err
	}
	m.CPUs = cpus
	var ru0 unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_CHILDREN, &ru0); err != nil {
		return m, 0, err
	}
	start := time.Now()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// Caught (not ignored, which the phase would inherit) and passed on.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return m, 0, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	code := -1
	for code < 0 {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return m, 0, fmt.Errorf("waiting for %s: %w", argv[0], err)
		}
		if pid == cmd.Process.Pid {
			switch {
			case ws.Exited():
				code = ws.ExitStatus()
			case ws.Signaled():
				code = 128 + int(ws.Signal())
			}
		}
	}
	// Orphans that have already exited are reaped now; one still running is
	// a leak of the phase, ended here: its CPU time is the phase's, the
	// time it takes to end is not (wall time and the machine's busy time
	// are read first).
	reapSome()
	m.Wall = time.Since(start).Seconds()
	busy1, _, err := cpuStat()
	if err != nil {
		return m, 0, err
	}
	m.Left, m.Stuck = stopLeftovers()
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_CHILDREN, &ru); err != nil {
		return m, 0, err
	}
	secs := func(t unix.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	m.CPU = secs(ru.Utime) + secs(ru.Stime) - secs(ru0.Utime) - secs(ru0.Stime)
	m.Foreign = max(0, busy1-busy0-m.CPU)
	m.Exit = code
	return m, code, nil
}
