package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

// Margin is how far the run's total, corrected for foreign load, may exceed
// the sum of its phases' shares before the run fails. The shares are the
// phases' measured quiet times with some headroom (budget.tsv), so a
// doubling of any large part of the run exceeds it, while the spread of
// repeated runs on one quiet machine (a few per cent in total; single
// phases with network waits or cluster start-ups vary more) and what the
// foreign-load correction misses on a busy machine stay under it.
const Margin = 1.25

// budget is budget.tsv: each phase's cold and warm share, and the limits the
// README promises for the whole run (the "total" row).
type budget struct {
	order  []string
	shares map[string]share
	total  share
	// ref is the reference machine's probe (probe.go): the machine the shares were measured on.
	ref speed
}

type share struct {
	Cold, Warm float64
	// Proc is how much of the phase's time scales with the machine's cost of a process (the rest with its compute
	// speed): budget.tsv's scale column, "cpu" (0), "proc" (1) or "proc=F".
	Proc float64
	What string
}

func loadBudget(path string) (*budget, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseBudget(path, f)
}

func parseBudget(name string, r io.Reader) (*budget, error) {
	b := &budget{shares: map[string]share{}}
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if strings.TrimSpace(text) == "" || strings.HasPrefix(text, "#") {
			continue
		}
		f := strings.Split(text, "\t")
		if len(f) != 5 {
			return nil, fmt.Errorf("%s:%d: want 5 tab-separated fields (id, cold s, warm s, scale, what), got %d", name, line, len(f))
		}
		if f[0] == "reference" {
			proc, err1 := strconv.ParseFloat(f[1], 64)
			cpu, err2 := strconv.ParseFloat(f[2], 64)
			if err := errors.Join(err1, err2); err != nil || proc <= 0 || cpu <= 0 || f[3] != "-" {
				return nil, fmt.Errorf("%s:%d: the reference row is the probe's milliseconds, proc and cpu (> 0), then -: %q", name, line, text)
			}
			b.ref = speed{Proc: proc, CPU: cpu}
			continue
		}
		cold, err1 := strconv.ParseFloat(f[1], 64)
		warm, err2 := strconv.ParseFloat(f[2], 64)
		if err := errors.Join(err1, err2); err != nil || cold < warm || warm < 0 {
			return nil, fmt.Errorf("%s:%d: cold and warm must be seconds, cold >= warm >= 0: %q %q", name, line, f[1], f[2])
		}
		s := share{Cold: cold, Warm: warm, What: f[4]}
		if f[0] == "total" {
			if f[3] != "-" {
				return nil, fmt.Errorf("%s:%d: the total row has no scale (-), got %q", name, line, f[3])
			}
			b.total = s
			continue
		}
		proc, err := parseScale(f[3])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		s.Proc = proc
		if _, dup := b.shares[f[0]]; dup {
			return nil, fmt.Errorf("%s:%d: phase %s listed twice", name, line, f[0])
		}
		b.order = append(b.order, f[0])
		b.shares[f[0]] = s
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if b.total.Cold == 0 {
		return nil, fmt.Errorf("%s: no total row", name)
	}
	if b.ref.Proc == 0 {
		return nil, fmt.Errorf("%s: no reference row (the reference machine's probe)", name)
	}
	var cold, warm float64
	for _, s := range b.shares {
		cold += s.Cold
		warm += s.Warm
	}
	if cold > b.total.Cold || warm > b.total.Warm {
		return nil, fmt.Errorf("%s: the phases' shares (cold %.0fs, warm %.0fs) exceed the total (cold %.0fs, warm %.0fs)",
			name, cold, warm, b.total.Cold, b.total.Warm)
	}
	return b, nil
}

// parseScale reads a scale: what part of a phase's time scales with the cost of a process.
func parseScale(v string) (float64, error) {
	switch v {
	case "cpu":
		return 0, nil
	case "proc":
		return 1, nil
	}
	if f, ok := strings.CutPrefix(v, "proc="); ok {
		if x, err := strconv.ParseFloat(f, 64); err == nil && x >= 0 && x <= 1 {
			return x, nil
		}
	}
	return 0, fmt.Errorf("scale must be cpu, proc or proc=F (0 <= F <= 1), got %q", v)
}

// factor is how many times its reference time the phase takes on a machine with these factors.
func (s share) factor(proc, cpu float64) float64 { return s.Proc*proc + (1-s.Proc)*cpu }

func (s share) of(cold bool) float64 {
	if cold {
		return s.Cold
	}
	return s.Warm
}

// overBudget is the run's "no": the corrected total exceeds the budget.
type overBudget struct {
	Total, Limit float64
	// Worst names the phases furthest over their share, worst first.
	Worst []string
}

func (e *overBudget) Error() string {
	return fmt.Sprintf("over budget: %.0fs (corrected for foreign load) > %.0fs (the shares' sum × %.2f); furthest over their share: %s",
		e.Total, e.Limit, Margin, strings.Join(e.Worst, ", "))
}

// report prints every phase against its share and judges the total. here is this machine's probe; nil judges it as
// the reference machine.
func report(w io.Writer, b *budget, ms []measurement, here *speed) error {
	fproc, fcpu := 1.0, 1.0
	if here != nil {
		var err error
		if fproc, fcpu, err = factors(b.ref, *here); err != nil {
			return err
		}
		fmt.Fprintf(w, "::: this machine: %v; the reference machine: %v; shares scaled by %.2f (a process), %.2f (compute)\n", *here, b.ref, fproc, fcpu)
	}
	fmt.Fprintf(w, "::: phase timings (share: the phase's cold or warm budget, ci/phase/budget.tsv, scaled to this machine; alone: corrected for what else ran)\n")
	fmt.Fprintf(w, "%-22s %5s %7s %7s %7s %7s %7s %6s\n", "phase", "state", "wall", "cpu", "others", "alone", "share", "ratio")
	var wall, alone, limit float64
	type over struct {
		id    string
		ratio float64
	}
	var overs []over
	for _, m := range ms {
		s, ok := b.shares[m.ID]
		if !ok {
			return fmt.Errorf("phase %s has no share in the budget", m.ID)
		}
		sh := s.of(m.Cold) * s.factor(fproc, fcpu)
		state := "warm"
		if m.Cold {
			state = "cold"
		}
		ratio := m.Adjusted() / sh
		fmt.Fprintf(w, "%-22s %5s %6.0fs %6.0fs %6.0fs %6.0fs %6.0fs %5.2f%s\n",
			m.ID, state, m.Wall, m.CPU, m.Foreign, m.Adjusted(), sh, ratio, map[bool]string{true: "  over", false: ""}[ratio > 1])
		wall += m.Wall
		alone += m.Adjusted()
		limit += sh
		if ratio > 1 {
			overs = append(overs, over{m.ID, ratio})
		}
	}
	fmt.Fprintf(w, "%-22s %5s %6.0fs %7s %7s %6.0fs %6.0fs %5.2f (fails above %.2f)\n", "total", "", wall, "", "", alone, limit, alone/limit, Margin)
	if alone > limit*Margin {
		sort.SliceStable(overs, func(i, j int) bool { return overs[i].ratio > overs[j].ratio })
		e := &overBudget{Total: alone, Limit: limit * Margin}
		for _, o := range overs {
			e.Worst = append(e.Worst, fmt.Sprintf("%s (%.1f× its share)", o.id, o.ratio))
		}
		return e
	}
	return nil
}

func appendResult(path string, m measurement) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%s\t%t\t%.1f\t%.1f\t%.1f\t%d\t%d\n", m.ID, m.Cold, m.Wall, m.CPU, m.Foreign, m.CPUs, m.Exit)
	return errors.Join(err, f.Close())
}

func loadResults(path string) ([]measurement, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var ms []measurement
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 7 {
			return nil, fmt.Errorf("%s:%d: malformed: %q", path, i+1, line)
		}
		var m measurement
		var errs []error
		num := func(s string) float64 {
			v, err := strconv.ParseFloat(s, 64)
			errs = append(errs, err)
			return v
		}
		m.ID = f[0]
		m.Cold = f[1] == "true"
		m.Wall, m.CPU, m.Foreign = num(f[2]), num(f[3]), num(f[4])
		m.CPUs = int(num(f[5]))
		m.Exit = int(num(f[6]))
		if err := errors.Join(errs...); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		ms = append(ms, m)
	}
	return ms, nil
}
