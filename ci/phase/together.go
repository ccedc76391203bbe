package main

import (
	"bufio"
	"errors"
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
// line). Every job runs to its end even when another fails (a CI log must show every failure, and each suite bounds
// its own time); SIGINT, SIGTERM and SIGHUP are passed to every job's group (a SIGKILL of together itself reaches
// no job: kill their groups). It prints each job's time and exit status and returns 0 only when every job passed,
// else the first failed job's status.
func together(args []string, out io.Writer) (int, error) {
	jobs, err := parseJobs(args)
	if err != nil {
		return 2, err
	}
	lw := &lineWriter{w: out}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	var wg sync.WaitGroup
	var procs []*os.Process
	for _, j := range jobs {
		cmd := exec.Command("sh", "-c", j.cmd)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		r, w, err := os.Pipe()
		if err != nil {
			return 2, err
		}
		cmd.Stdout, cmd.Stderr = w, w
		start := time.Now()
		err = cmd.Start()
		_ = w.Close() // the job holds the write end now
		if err != nil {
			_ = r.Close()
			for _, p := range procs {
				_ = syscall.Kill(-p.Pid, syscall.SIGTERM)
			}
			return 2, fmt.Errorf("starting %s: %w", j.name, err)
		}
		procs = append(procs, cmd.Process)
		lw.line(fmt.Sprintf("::: together: %s started: %s", j.name, j.cmd))
		read := make(chan struct{})
		go func() {
			defer close(read)
			prefixLines(r, "["+j.name+"] ", lw)
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := cmd.Wait()
			j.wall = time.Since(start)
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
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
wait:
	for {
		select {
		case s := <-sigs:
			for _, p := range procs {
				_ = syscall.Kill(-p.Pid, s.(syscall.Signal))
			}
		case <-done:
			break wait
		}
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

func (j *job) status() string {
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
