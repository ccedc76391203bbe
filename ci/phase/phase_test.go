package main

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestAdjusted(t *testing.T) {
	for _, c := range []struct {
		name string
		m    measurement
		want float64
	}{
		{"quiet machine: the wall time", measurement{Wall: 100, CPU: 150, Foreign: 0, CPUs: 2}, 100},
		// A CPU-bound phase beside one other CPU-bound process: twice as long,
		// the other used one core throughout.
		{"one competing build", measurement{Wall: 200, CPU: 200, Foreign: 200, CPUs: 2}, 100},
		// Never below its own CPU spread over the cores.
		{"floor", measurement{Wall: 100, CPU: 160, Foreign: 190, CPUs: 2}, 80},
	} {
		if got := c.m.Adjusted(); got != c.want {
			t.Errorf("%s: Adjusted() = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestParseBudgetErrors(t *testing.T) {
	const ref = "reference\t5\t200\t-\tr\n"
	for _, c := range []struct{ in, want string }{
		{ref + "a\t1\t1\tcpu\tx\n", "no total row"},
		{"a\t1\t1\tcpu\tx\ntotal\t9\t9\t-\tt\n", "no reference row"},
		{"a\t1\t1\tx\n", "b.tsv:1: want 5 tab-separated fields"},
		{"a\t1\t2\tcpu\tx\ntotal\t9\t9\t-\tt\n", "b.tsv:1: cold and warm must be seconds, cold >= warm"},
		{"a\t1\t1\tcpu\tx\na\t1\t1\tcpu\tx\ntotal\t9\t9\t-\tt\n", "b.tsv:2: phase a listed twice"},
		{ref + "a\t10\t1\tcpu\tx\nb\t10\t1\tproc\tx\ntotal\t15\t9\t-\tt\n", "shares (cold 20s, warm 2s) exceed the total (cold 15s, warm 9s)"},
		{"a\t1\t1\tdisk\tx\n", "b.tsv:1: scale must be cpu, proc or proc=F"},
		{"a\t1\t1\tproc=1.5\tx\n", "b.tsv:1: scale must be cpu, proc or proc=F"},
		{"total\t9\t9\tcpu\tt\n", "b.tsv:1: the total row has no scale"},
		{"reference\t0\t200\t-\tr\n", "b.tsv:1: the reference row is the probe's milliseconds"},
	} {
		_, err := parseBudget("b.tsv", strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want an error containing %q", c.in, err, c.want)
		}
	}
}

func TestReport(t *testing.T) {
	b, err := parseBudget("b.tsv", strings.NewReader("# c\nreference\t5\t200\t-\tr\nbuild\t300\t10\tcpu\tx\ntest\t100\t50\tproc\ty\ntotal\t400\t60\t-\tt\n"))
	if err != nil {
		t.Fatal(err)
	}
	slow := &speed{Proc: 25, CPU: 260} // processes cost 5 times the reference's, compute 1.3 times
	for _, c := range []struct {
		name string
		ms   []measurement
		// here: the machine's probe (nil: the reference machine)
		here *speed
		// worst: the phase the failure names first; "" passes.
		worst string
	}{
		{"warm, on time", []measurement{{ID: "build", Wall: 9, CPUs: 2}, {ID: "test", Wall: 55, CPUs: 2}}, nil, ""},
		{"cold, on time", []measurement{{ID: "build", Cold: true, Wall: 290, CPUs: 2}, {ID: "test", Cold: true, Wall: 90, CPUs: 2}}, nil, ""},
		// Within the margin: noise.
		{"warm, 20% over", []measurement{{ID: "build", Wall: 12, CPUs: 2}, {ID: "test", Wall: 60, CPUs: 2}}, nil, ""},
		// A doubling fails, naming the phase.
		{"warm, test doubled", []measurement{{ID: "build", Wall: 10, CPUs: 2}, {ID: "test", Wall: 100, CPUs: 2}}, nil, "test"},
		// The same wall time on a machine that another build kept busy passes.
		{"warm, test doubled by load", []measurement{{ID: "build", Wall: 10, CPUs: 2}, {ID: "test", Wall: 100, CPU: 50, Foreign: 100, CPUs: 2}}, nil, ""},
		// A cold machine judged by warm shares would fail; by cold ones it passes.
		{"cold build judged cold", []measurement{{ID: "build", Cold: true, Wall: 280, CPUs: 2}, {ID: "test", Wall: 50, CPUs: 2}}, nil, ""},
		// A machine where a process costs five times as much: the process-bound phase takes five times as long and
		// passes there; the same times on the reference machine fail; a doubling on the slow machine fails.
		{"slow machine, on time", []measurement{{ID: "build", Wall: 13, CPUs: 2}, {ID: "test", Wall: 250, CPUs: 2}}, slow, ""},
		{"slow machine's times on the reference", []measurement{{ID: "build", Wall: 13, CPUs: 2}, {ID: "test", Wall: 250, CPUs: 2}}, nil, "test"},
		{"slow machine, test doubled", []measurement{{ID: "build", Wall: 13, CPUs: 2}, {ID: "test", Wall: 500, CPUs: 2}}, slow, "test"},
		// A faster machine: the shares shrink with it, so a doubling there fails too.
		{"fast machine, test doubled", []measurement{{ID: "build", Wall: 8, CPUs: 2}, {ID: "test", Wall: 50, CPUs: 2}}, &speed{Proc: 2.5, CPU: 160}, "test"},
	} {
		var out bytes.Buffer
		err := report(&out, b, c.ms, c.here)
		var over *overBudget
		switch {
		case c.worst == "" && err != nil:
			t.Errorf("%s: %v\n%s", c.name, err, out.String())
		case c.worst != "" && !errors.As(err, &over):
			t.Errorf("%s: want over budget, got %v\n%s", c.name, err, out.String())
		case c.worst != "" && (len(over.Worst) == 0 || !strings.HasPrefix(over.Worst[0], c.worst+" ")):
			t.Errorf("%s: want %s named first, got %v", c.name, c.worst, over.Worst)
		}
	}
	var out bytes.Buffer
	if err := report(&out, b, []measurement{{ID: "lint", Wall: 1}}, nil); err == nil || !strings.Contains(err.Error(), "phase lint has no share") {
		t.Errorf("a phase without a share: %v", err)
	}
}

// TestReportRealBudget judges CI's warm run of 2026-12-06 (3853a96, its printed alone times) by the real
// budget: a good run on the reference kind of machine whose compute probe read 0.62 of the reference's while its
// phases ran as slow as ever. It failed there (1.34 of the shares scaled by 0.62); it must pass, and its doubling
// must not.
func TestReportRealBudget(t *testing.T) {
	b, err := loadBudget("budget.tsv")
	if err != nil {
		t.Fatal(err)
	}
	here := &speed{Proc: 4.99, CPU: 101}
	alone := map[string]float64{"gomod": 0, "test": 64, "drift": 7, "vet": 2, "scan": 0, "test-heavy": 305, "test-kms": 9,
		"test-node": 889, "test-node-e2e": 126, "e2e": 89, "flux-build": 0, "agents-build": 0, "argocd-build": 0, "e2e-together": 804}
	run := func(times float64) error {
		var ms []measurement
		for id, a := range alone {
			ms = append(ms, measurement{ID: id, Wall: a * times, CPUs: 2})
		}
		sort.Slice(ms, func(i, j int) bool { return ms[i].ID < ms[j].ID })
		var out bytes.Buffer
		err := report(&out, b, ms, here)
		t.Logf("%.0fx:\n%s", times, out.String())
		return err
	}
	if err := run(1); err != nil {
		t.Errorf("CI's good run: %v", err)
	}
	var over *overBudget
	if err := run(2); !errors.As(err, &over) {
		t.Errorf("CI's run doubled: want over budget, got %v", err)
	}
}

// spinCPU is how much CPU time the test's orphan burns.
const spinCPU = 0.3

// TestMain: with PHASE_TEST_SPIN set, the test binary is TestMeasure's
// orphan: it burns spinCPU seconds of CPU, whatever the load, then writes
// the file it names.
func TestMain(m *testing.M) {
	if os.Getenv(probeChildEnv) != "" {
		os.Exit(0) // TestProbe's Go process, as the phase binary's main does
	}
	if f := os.Getenv("PHASE_TEST_SPIN"); f != "" {
		var ru unix.Rusage
		for x := 0; ; x++ {
			if x%1000000 == 0 {
				_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
				if float64(ru.Utime.Sec)+float64(ru.Utime.Usec)/1e6 >= spinCPU {
					break
				}
			}
		}
		_ = os.WriteFile(f, nil, 0o644)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestMeasure runs real processes: the CPU time of an orphan the phase left
// behind (reparented to the runner, its subreaper) is the phase's own, and
// the exit code is passed on.
func TestMeasure(t *testing.T) {
	done := filepath.Join(t.TempDir(), "done")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PHASE_TEST_SPIN", done)
	// The spinner runs in a process whose parent (the subshell) exits at
	// once: an orphan; the phase waits for its file, not for it, then exits 3.
	script := `( "$1" & )
while [ ! -e "$2" ]; do sleep 0.05; done; sleep 0.3; exit 3`
	m, code, err := measure("x", false, []string{"sh", "-c", script, "sh", exe, done})
	if err != nil {
		t.Fatal(err)
	}
	if code != 3 || m.Exit != 3 {
		t.Fatalf("exit %d (%d), want 3", code, m.Exit)
	}
	if m.CPU < spinCPU || m.CPUs < 1 {
		t.Errorf("the orphan's CPU time (%.1fs) is not the phase's: %+v", spinCPU, m)
	}
	t.Logf("%s", m.summary())
}

// TestLeftovers: what a phase leaves running is ended when its command exits and named, a process that ignores
// SIGTERM included (SIGKILL after the grace), and so is what their deaths hand to the runner.
func TestLeftovers(t *testing.T) {
	defer func(g time.Duration) { leftoverGrace = g }(leftoverGrace)
	leftoverGrace = time.Second
	pids := filepath.Join(t.TempDir(), "pids")
	// a sleeper; a shell that ignores SIGTERM with a sleeper of its own (reparented to the runner when the shell dies)
	script := `sleep 300 & echo $! >>"$1"
sh -c 'trap "" TERM; sleep 301 & echo $$ $! >>"$1"; wait; wait' sh "$1" &
until [ "$(wc -w <"$1")" -ge 3 ]; do sleep 0.05; done; exit 0`
	start := time.Now()
	m, code, err := measure("x", false, []string{"sh", "-c", script, "sh", pids})
	if err != nil || code != 0 {
		t.Fatalf("exit %d, %v", code, err)
	}
	b, err := os.ReadFile(pids)
	if err != nil {
		t.Fatal(err)
	}
	left := strings.Join(m.Left, " ")
	for _, f := range strings.Fields(string(b)) {
		pid, _ := strconv.Atoi(f)
		if state, _, err := procStat(pid); err == nil {
			t.Errorf("process %s is still there (%s) after the phase", f, state)
		}
		if !strings.Contains(left, "["+f+"]") {
			t.Errorf("process %s is not among the ended: %s", f, left)
		}
	}
	for _, want := range []string{"sleep[", "sh["} {
		if !strings.Contains(left, want) {
			t.Errorf("no %s…] among the ended: %s", want, left)
		}
	}
	if d := time.Since(start); d < leftoverGrace || m.Wall >= leftoverGrace.Seconds() {
		t.Errorf("the shell that ignores SIGTERM ended after %s (want at least the grace, %s), the phase's wall %.1fs counts it", d, leftoverGrace, m.Wall)
	}
	t.Logf("ended: %s", left)
}

// TestCIRunPhasesHaveShares: every phase .ci/run runs has a share, every share
// is a phase .ci/run runs, and the README quotes the budget's totals.
func TestCIRunPhasesHaveShares(t *testing.T) {
	b, err := loadBudget("budget.tsv")
	if err != nil {
		t.Fatal(err)
	}
	run, err := os.ReadFile(filepath.Join("..", "..", ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^phase ([a-z0-9-]+) `).FindAllStringSubmatch(string(run), -1) {
		ran[m[1]] = true
		if _, ok := b.shares[m[1]]; !ok {
			t.Errorf(".ci/run runs phase %s, which has no share in budget.tsv", m[1])
		}
	}
	for _, id := range b.order {
		if !ran[id] {
			t.Errorf("budget.tsv has a share for %s, which .ci/run does not run", id)
		}
	}
	// Every document that quotes the totals (the README's summary, docs/testing.md's section) quotes these.
	for _, doc := range []string{"README.md", filepath.Join("docs", "testing.md")} {
		text, err := os.ReadFile(filepath.Join("..", "..", doc))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`budget \(ci/phase/budget\.tsv\): cold (\d+) s, warm (\d+) s`).FindSubmatch(text)
		if m == nil {
			t.Fatalf("%s does not quote the budget as `budget (ci/phase/budget.tsv): cold N s, warm M s`", doc)
		}
		cold, _ := strconv.Atoi(string(m[1]))
		warm, _ := strconv.Atoi(string(m[2]))
		if float64(cold) != b.total.Cold || float64(warm) != b.total.Warm {
			t.Errorf("%s quotes cold %d s, warm %d s; budget.tsv's total is cold %.0f s, warm %.0f s", doc, cold, warm, b.total.Cold, b.total.Warm)
		}
	}
}

func TestTogether(t *testing.T) {
	// a job's output is read for a second after it exited (5 in use): the leftover case waits that long
	defer func(g time.Duration) { outputGrace = g }(outputGrace)
	outputGrace = time.Second
	defer func(f func() (float64, error)) { procCost = f }(procCost)
	procCost = func() (float64, error) { return 5.6, nil }
	defer func(f func() int) { numCPU = f }(numCPU)
	numCPU = func() int { return 2 }
	for _, c := range []struct {
		name  string
		args  []string
		code  int
		err   string
		lines []string // each must be in the output, whole
	}{
		// side by side: a waits for the file b makes (one after the other, a would give up and fail)
		{name: "both pass, side by side, each line prefixed", args: []string{
			"a=echo one; i=0; until [ -e b.done ]; do i=$((i+1)); [ $i -lt 600 ] || exit 9; sleep 0.1; done; echo two",
			"b=echo three; : >b.done",
		}, lines: []string{"[a] one", "[a] two", "[b] three"}},
		{name: "a failure is reported after every job ended", args: []string{
			"ok=sleep 1; echo done", "bad=echo broken >&2; exit 3",
		}, code: 3, err: "failed: bad", lines: []string{"[ok] done", "[bad] broken"}},
		{name: "a job killed by a signal", args: []string{"k=kill -9 $$", "ok=true"}, code: 137, err: "failed: k"},
		// a line longer than the reader's buffer comes out in pieces, and what follows it is not lost
		{name: "a 2 MB line", args: []string{"long=head -c 2000000 /dev/zero | tr '\\0' x; echo; echo after", "ok=true"},
			lines: []string{"[long] after"}},
		// a process the job leaves holding its output: the job ends anyway, and nothing of it prints after that
		{name: "a leftover process", args: []string{"d=(while :; do echo tick; sleep 0.05; done) & sleep 0.2; echo bye", "ok=true"},
			lines: []string{"[d] bye", "::: together: d left a process holding its output"}},
		// -jobs 1: one after the other, in the order given (b fails unless a ended before it started)
		{name: "one at a time", args: []string{"-jobs", "1", "a=sleep 0.3; : >a.done", "b=[ -e a.done ] || exit 7; echo after-a"},
			lines: []string{"::: together: 1 of 2 jobs at a time (-jobs 1)", "[b] after-a"}},
		// -jobs 2 of three: a and b side by side (a waits for b), c only once one of them ended
		{name: "two of three at a time", args: []string{"-jobs", "2",
			"a=i=0; until [ -e b.done ]; do i=$((i+1)); [ $i -lt 600 ] || exit 9; sleep 0.1; done; sleep 0.3; : >a.done",
			"b=: >b.done", "c=[ -e b.done ] || exit 7; echo c-ran"},
			lines: []string{"::: together: 2 of 3 jobs at a time (-jobs 2)", "[c] c-ran"}},
		{name: "more slots than jobs", args: []string{"-jobs", "8", "a=true", "b=true"}},
		{name: "jobs 0", args: []string{"-jobs", "0", "a=true", "b=true"}, code: 2, err: `-jobs "0": want all, auto or a number`},
		{name: "jobs not a number", args: []string{"-jobs", "some", "a=true", "b=true"}, code: 2, err: `-jobs "some"`},
		// auto: the machine's process cost decides (procCost stubbed below: 5.6 ms, the slow kind)
		{name: "auto on a machine where processes are dear", args: []string{"-jobs", "auto", "a=true", "b=true", "c=true"},
			lines: []string{"::: together: 2 of 3 jobs at a time (a process costs 5.60 ms of CPU here, over 2.5: one at a time per core, 2 cores)"}},
		{name: "one job is not together", args: []string{"a=true"}, code: 2, err: "usage"},
		{name: "a job without a name", args: []string{"=true", "b=true"}, code: 2, err: `"=true": want NAME=COMMAND`},
		{name: "a name twice", args: []string{"a=true", "a=false"}, code: 2, err: "given twice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			var out bytes.Buffer
			code, err := together(c.args, &out)
			if code != c.code {
				t.Errorf("code %d, want %d\n%s", code, c.code, out.String())
			}
			if (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
				t.Errorf("err %v, want %q", err, c.err)
			}
			got := strings.Split(out.String(), "\n")
			for _, l := range c.lines {
				if !slices.Contains(got, l) {
					t.Errorf("no line %q in\n%.2000s", l, out.String())
				}
			}
			// nothing of a job prints after its "ended" line
			for _, a := range c.args {
				name, _, _ := strings.Cut(a, "=")
				i := slices.IndexFunc(got, func(l string) bool { return strings.HasPrefix(l, "::: together: "+name+" ended: ") })
				if i < 0 {
					continue
				}
				for _, l := range got[i:] {
					if strings.HasPrefix(l, "["+name+"] ") {
						t.Errorf("%q printed after %s ended", l, name)
					}
				}
			}
		})
	}
}

// TestProbe runs the machine probe for real: both halves measure something, and the file round-trips.
func TestProbe(t *testing.T) {
	s, err := probe(1) // one round: the test checks that it works, .ci/run takes the least of probeRounds
	if err != nil {
		t.Fatal(err)
	}
	if s.Proc <= 0 || s.CPU <= 0 {
		t.Fatalf("probe: %v", s)
	}
	f := filepath.Join(t.TempDir(), "probe")
	if err := writeSpeed(f, s); err != nil {
		t.Fatal(err)
	}
	back, err := readSpeed(f)
	if err != nil || math.Abs(back.Proc-s.Proc) > 0.001 || math.Abs(back.CPU-s.CPU) > 0.1 {
		t.Fatalf("read back %v, %v; wrote %v", back, err, s)
	}
	t.Logf("this machine: %v", s)
	if _, _, err := factors(speed{Proc: s.Proc / 20, CPU: s.CPU}, s); err == nil || !strings.Contains(err.Error(), "a broken probe") {
		t.Errorf("a probe 20 times off the reference: %v", err)
	}
}

// TestTogetherSignal: a signal reaches the running job's group and starts no further job.
func TestTogetherSignal(t *testing.T) {
	t.Chdir(t.TempDir())
	var out syncBuffer
	done := make(chan int)
	go func() {
		code, _ := together([]string{"-jobs", "1", "a=echo up; sleep 30", "b=echo b-ran"}, &out)
		done <- code
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), "[a] up") {
		if time.Now().After(deadline) {
			t.Fatalf("a never started:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := unix.Kill(os.Getpid(), unix.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 129 {
			t.Errorf("code %d, want 129 (a, ended by SIGHUP)\n%s", code, out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("together did not end after SIGHUP:\n%s", out.String())
	}
	for _, l := range []string{"::: together: a                129s, FAILED (exit 129)", "::: together: b                not started (a signal ended the run), exit 129"} {
		if !containsStatus(out.String(), l) {
			t.Errorf("no line like %q in\n%s", l, out.String())
		}
	}
	if strings.Contains(out.String(), "b-ran") {
		t.Errorf("b started after the signal:\n%s", out.String())
	}
}

// containsStatus: the summary line of a job, its seconds ignored.
func containsStatus(out, want string) bool {
	re := regexp.MustCompile(`\d+s, `)
	for _, l := range strings.Split(out, "\n") {
		if re.ReplaceAllString(l, "Ns, ") == re.ReplaceAllString(want, "Ns, ") {
			return true
		}
	}
	return false
}

// syncBuffer: a bytes.Buffer written by together's goroutines and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestAutoJobs(t *testing.T) {
	for _, c := range []struct {
		procMs      float64
		cpus, total int
		want        int
	}{
		{procMs: 1.1, cpus: 2, total: 4, want: 4}, // the fast kind: all at once
		{procMs: 2.5, cpus: 2, total: 4, want: 4},
		{procMs: 5.6, cpus: 2, total: 4, want: 2}, // the slow kind: one per core
		{procMs: 5.6, cpus: 8, total: 4, want: 4},
		{procMs: 5.6, cpus: 0, total: 4, want: 1},
	} {
		n, why, err := autoJobs(c.procMs, c.cpus, c.total)
		if err != nil || n != c.want || why == "" {
			t.Errorf("autoJobs(%v, %d, %d) = %d, %q, %v; want %d", c.procMs, c.cpus, c.total, n, why, err, c.want)
		}
	}
}
