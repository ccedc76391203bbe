package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

// outputGrace is how long together reads a job's output after the job exited, for what its last processes still
// write (a var: the test shortens it).
var outputGrace = 5 * time.Second

// job is one command of `phase together`: NAME=SHELL-COMMAND.
type job struct {
	name, cmd string
	wall      time.Duration
	code      int
	skipped   bool // never started: a signal came first
}

func parseJobs(args []string) ([]*job, error) {
	if len(args) < 2 {
		return nil, errors.New("usage: phase together NAME=COMMAND NAME=COMMAND...")
	}
	seen := map[string]bool{}
	var jobs []*job
	for _, a := range args {
		name, cmd, ok := strings.Cut(a, "=")
		if !ok || name == "" || strings.TrimSpace(cmd) == "" || strings.ContainsAny(name, " \t") {
			return nil, fmt.Errorf("%q: want NAME=COMMAND", a)
		}
		if seen[name] {
			return nil, fmt.Errorf("%q: the name %s is given twice", a, name)
		}
		seen[name] = true
		jobs = append(jobs, &job{name: name, cmd: cmd})
	}
	return jobs, nil
}

// together runs the jobs side by side, each with `sh -c` in its own process group, and writes their output to out
// line by line, each line prefixed with its job's name (whole lines only, so that two suites never mix within a
// line). At most -jobs run at once (default: all), started in the order given as earlier ones end. Every job runs to
// its end even when another fails (a CI log must show every failure, and each suite bounds its own time); SIGINT,
// SIGTERM and SIGHUP are passed to every running job's group and start no further job (a SIGKILL of together itself
// reaches no job: kill their groups). It prints each job's time and exit status and returns 0 only when every job
// passed, else the first failed job's status.
func together(args []string, out io.Writer) (int, error) {
	fs := flag.NewFlagSet("together", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	jobsFlag := fs.String("jobs", "all", "how many jobs run at once: a number, all, or auto (jobs.go: by what a process costs here)")
	if err := fs.Parse(args); err != nil {
		return 2, err
	}
	jobs, err := parseJobs(fs.Args())
	if err != nil {
		return 2, err
	}
	n, why, err := jobsLimit(*jobsFlag, len(jobs))
	if err != nil {
		return 2, err
	}
	lw := &lineWriter{w: out}
	if n < len(jobs) {
		lw.line(fmt.Sprintf("::: together: %d of %d jobs at a time (%s)", n, len(jobs), why))
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	ended := make(chan *job)
	var procs []*os.Process
	pending, running := jobs, 0
	var stop syscall.Signal
	for {
		for running < n && len(pending) > 0 && stop == 0 {
			p, err := start(pending[0], lw, ended)
			if err != nil {
				for _, p := range procs {
					_ = syscall.Kill(-p.Pid, syscall.SIGTERM)
				}
				for ; running > 0; running-- {
					<-ended
				}
				return 2, err
			}
			procs = append(procs, p)
			pending, running = pending[1:], running+1
		}
		if running == 0 {
			break
		}
		select {
		case s := <-sigs:
			stop = s.(syscall.Signal)
			for _, p := range procs {
				_ = syscall.Kill(-p.Pid, stop)
			}
		case <-ended:
			running--
		}
	}
	for _, j := range pending {
		j.code, j.skipped = 128+int(stop), true
	}
	code := 0
	var failed []string
	for _, j := range jobs {
		lw.line(fmt.Sprintf("::: together: %-16s %s", j.name, j.status()))
		if j.code != 0 {
			failed = append(failed, j.name)
			if code == 0 {
				code = j.code
			}
		}
	}
	if len(failed) > 0 {
		return code, fmt.Errorf("failed: %s (their lines are prefixed with their names)", strings.Join(failed, ", "))
	}
	return 0, nil
}

// start starts job j in its own process group, its output prefixed into lw; j is sent on ended once it exited and
// its output was read.
func start(j *job, lw *lineWriter, ended chan<- *job) (*os.Process, error) {
	cmd := exec.Command("sh", "-c", j.cmd)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = w, w
	t0 := time.Now()
	err = cmd.Start()
	_ = w.Close() // the job holds the write end now
	if err != nil {
		_ = r.Close()
		return nil, fmt.Errorf("starting %s: %w", j.name, err)
	}
	lw.line(fmt.Sprintf("::: together: %s started: %s", j.name, j.cmd))
	read := make(chan struct{})
	go func() {
		defer close(read)
		prefixLines(r, "["+j.name+"] ", lw)
	}()
	go func() {
		err := cmd.Wait()
		j.wall = time.Since(t0)
		j.code = exitCode(err)
		// a process the job left running may hold the pipe: its output is not waited for long (closing the
		// read end ends the reader, which is waited for, so nothing of this job prints after "ended")
		select {
		case <-read:
		case <-time.After(outputGrace):
			lw.line(fmt.Sprintf("::: together: %s left a process holding its output", j.name))
			_ = r.Close()
			<-read
		}
		_ = r.Close()
		lw.line(fmt.Sprintf("::: together: %s ended: %s", j.name, j.status()))
		ended <- j
	}()
	return cmd.Process, nil
}

func (j *job) status() string {
	if j.skipped {
		return fmt.Sprintf("not started (a signal ended the run), exit %d", j.code)
	}
	if j.code == 0 {
		return fmt.Sprintf("%.0fs, passed", j.wall.Seconds())
	}
	return fmt.Sprintf("%.0fs, FAILED (exit %d)", j.wall.Seconds(), j.code)
}

func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return 1
}

// prefixLines copies r to lw line by line, each line prefixed; a line longer than the reader's buffer goes out
// in prefixed pieces (nothing after it is lost), and a last line without a newline is kept.
func prefixLines(r io.Reader, prefix string, lw *lineWriter) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		b, err := br.ReadSlice('\n')
		if len(b) > 0 {
			lw.line(prefix + strings.TrimSuffix(string(b), "\n"))
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// lineWriter writes whole lines under one lock.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) line(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintln(l.w, s)
}
