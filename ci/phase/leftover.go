package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// leftoverGrace is how long a process the phase left running gets to exit on SIGTERM before SIGKILL (a var: the
// test shortens it).
var leftoverGrace = 5 * time.Second

// stopLeftovers ends what the phase left running. The runner is the subreaper of everything the phase started, so a
// process still running when the phase's command has exited is the runner's child: a leak of the phase (a suite's
// daemon that a timeout's panic or a forgotten cleanup left). It would run on through every later phase, its CPU
// counted as foreign load, and on the machine after CI. Each is sent SIGTERM, then SIGKILL after leftoverGrace;
// their children are reparented to the runner as they die and are ended the same way. It returns what it ended and
// what not even SIGKILL ended within the grace (uninterruptible sleep), "comm[pid]", and reaps them, so that their CPU
// time counts as the phase's.
func stopLeftovers() (ended, stuck []string) {
	seen := map[int]bool{}
	for round := 0; round < 20; round++ {
		kids := children()
		if len(kids) == 0 {
			break
		}
		for _, pid := range kids {
			if !seen[pid] {
				seen[pid] = true
				ended = append(ended, fmt.Sprintf("%s[%d]", procComm(pid), pid))
			}
			_ = unix.Kill(pid, unix.SIGTERM)
		}
		// SIGKILL only those not reaped yet: a reaped PID may already be another process's
		pending := waitGone(kids, leftoverGrace)
		for _, pid := range pending {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		if pending = waitGone(pending, leftoverGrace); len(pending) > 0 {
			for _, pid := range pending {
				stuck = append(stuck, fmt.Sprintf("%s[%d]", procComm(pid), pid))
			}
			break // another round would wait for them again
		}
	}
	reapSome()
	return ended, stuck
}

// waitGone waits until each of pids (children of the runner) has exited and is reaped, or d has passed, and returns
// those that have not.
func waitGone(pids []int, d time.Duration) []int {
	pending := slices.Clone(pids)
	for deadline := time.Now().Add(d); len(pending) > 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		pending = slices.DeleteFunc(pending, func(pid int) bool {
			var ws unix.WaitStatus
			r, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
			return r == pid || errors.Is(err, unix.ECHILD)
		})
	}
	return pending
}

// reapSome reaps the children that have exited, without waiting, and returns how many.
func reapSome() int {
	n := 0
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return n
		}
		n++
	}
}

// children: the live (not zombie) processes whose parent is this one.
func children() []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var kids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		state, ppid, err := procStat(pid)
		if err == nil && ppid == self && state != "Z" {
			kids = append(kids, pid)
		}
	}
	return kids
}

// procStat reads a process's state and parent from /proc/PID/stat (the command name, in parentheses, may hold
// spaces and parentheses: the fields start after its last ")").
func procStat(pid int) (state string, ppid int, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, err
	}
	s := string(b)
	i := strings.LastIndex(s, ") ")
	if i < 0 {
		return "", 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 2 {
		return "", 0, errors.New("malformed /proc stat")
	}
	ppid, err = strconv.Atoi(f[1])
	return f[0], ppid, err
}

func procComm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if c := strings.TrimSpace(string(b)); c != "" {
		return c
	}
	return "?"
}
