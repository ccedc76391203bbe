// Package warn holds vet's warnings as data until they are printed, so that a
// run can group them: by default, warnings about the module's shipped example
// targets that share a cause and an action are folded into one line naming the
// targets; -v (--verbose) prints every line. A warning about any other target
// (one the user added or changed) is always printed in full.
package warn

import (
	"fmt"
	"sort"
	"strings"
)

// Causes: what a warning is about. Warnings of one cause and one action fold
// together.
const (
	// Unpinned: an artifact the nodes download (Subject gvisor.release.sha512)
	// or an image they run (Subject the image's values path) has no pinned
	// digest, and the profile does not require one.
	Unpinned = "unpinned"
	// Waived: a policy (Subject) is waived and the waiver let a finding
	// through; Action is the waiver's reason.
	Waived = "waived"
	// UnusedWaiver: a policy (Subject) is waived but nothing breaks it.
	UnusedWaiver = "unused-waiver"
	// ContainerdFloor: the release's shim needs a newer containerd than the
	// nodes may run.
	ContainerdFloor = "containerd-floor"
	// AdoptForeignRunsc: gvisor.host.adoptForeignRunsc is on.
	AdoptForeignRunsc = "adopt-foreign-runsc"
	// RunscFlag: a runsc flag (Subject) weakens the sandbox.
	RunscFlag = "runsc-flag"
	// UnknownType: a patch left an object of a type gvisorgen has no schema
	// for (Subject: apiVersion kind).
	UnknownType = "unknown-type"
)

// Warning is one warning of a run.
type Warning struct {
	Cause  string `json:"cause"`
	Target string `json:"target,omitempty"`
	// Subject is what of the cause: the field, the policy, the flag.
	Subject string `json:"subject,omitempty"`
	// Message is the full line, as -v prints it (without "warning: ").
	Message string `json:"msg"`
	// Action is the one next step, worded for every target of the cause (a
	// waiver's is its reason): a folded line ends with it.
	Action string `json:"action,omitempty"`
	// Example marks a warning about one of the module's shipped example
	// targets, unchanged (eval.Target.Example): only such warnings fold.
	Example bool `json:"example,omitempty"`
}

// Lines are the lines a run prints for ws (without "warning: "), sorted by
// cause, then target; a line printed twice is printed once. verbose prints
// every warning's full message. Otherwise the warnings about shipped example
// targets that share a cause and an action are folded into one line naming
// the targets, the subjects, the action and how many lines it stands for; a
// group of one warning, and every warning about a target that is not a
// shipped example, keeps its full message.
func Lines(ws []Warning, verbose bool) []string {
	type entry struct{ cause, target, line string }
	var entries []entry
	seen := map[string]bool{}
	type key struct{ cause, action string }
	groups := map[key][]Warning{}
	var order []key
	for _, w := range ws {
		if seen[w.Message] {
			continue
		}
		seen[w.Message] = true
		if verbose || !w.Example {
			entries = append(entries, entry{w.Cause, w.Target, w.Message})
			continue
		}
		k := key{w.Cause, w.Action}
		if groups[k] == nil {
			order = append(order, k)
		}
		groups[k] = append(groups[k], w)
	}
	for _, k := range order {
		g := groups[k]
		if len(g) == 1 {
			entries = append(entries, entry{g[0].Cause, g[0].Target, g[0].Message})
			continue
		}
		targets := distinct(g, func(w Warning) string { return w.Target })
		entries = append(entries, entry{k.cause, targets[0], folded(k.cause, k.action, targets, g)})
	}
	// Stable: a target's warnings of one cause keep the order vet found them in.
	sort.SliceStable(entries, func(i, j int) bool {
		a, b := entries[i], entries[j]
		if a.cause != b.cause {
			return a.cause < b.cause
		}
		return a.target < b.target
	})
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.line
	}
	return out
}

// folded is the line that stands for a group of warnings of one cause and one
// action about shipped example targets.
func folded(cause, action string, targets []string, g []Warning) string {
	subjects := distinct(g, func(w Warning) string { return w.Subject })
	one := len(targets) == 1
	var who string
	if one {
		who = "example target " + targets[0]
	} else {
		who = fmt.Sprintf("%d example targets", len(targets))
	}
	what := summary(cause, one, subjects)
	if !one {
		what += " (" + strings.Join(targets, ", ") + ")"
	}
	line := who + " " + what
	if action != "" {
		line += ": " + action
	}
	return fmt.Sprintf("%s [%d lines folded; -v prints every line]", line, len(g))
}

// summary says what the targets of a group do, in the verb's singular (one)
// or plural.
func summary(cause string, one bool, subjects []string) string {
	verb := func(singular, plural string) string {
		if one {
			return singular
		}
		return plural
	}
	list := strings.Join(subjects, ", ")
	noun := func(singular, plural string) string {
		if len(subjects) == 1 {
			return singular + " " + list
		}
		return plural + " " + list
	}
	switch cause {
	case Unpinned:
		return verb("pins", "pin") + " no digest for " + list
	case Waived:
		return verb("waives", "waive") + " " + noun("policy", "policies")
	case UnusedWaiver:
		return verb("waives", "waive") + " " + noun("policy", "policies") + " that nothing breaks"
	case ContainerdFloor:
		return "may run a containerd older than " + verb("its", "their") + " gVisor release's shim needs"
	case AdoptForeignRunsc:
		return verb("adopts", "adopt") + " runsc handlers gvisorgen did not make"
	case RunscFlag:
		return verb("sets", "set") + " runsc flags that weaken the sandbox: " + list
	case UnknownType:
		return verb("has", "have") + " objects of types gvisorgen does not know: " + list
	}
	if list != "" {
		return verb("has", "have") + " warnings " + cause + ": " + list
	}
	return verb("has", "have") + " warnings " + cause
}

// distinct are the non-empty values of f over g, sorted, each once.
func distinct(g []Warning, f func(Warning) string) []string {
	seen := map[string]bool{}
	var out []string
	for _, w := range g {
		if v := f(w); v != "" && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}
