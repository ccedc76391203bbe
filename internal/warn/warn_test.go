package warn

import (
	"slices"
	"strings"
	"testing"
)

// unpinned and waived build warnings like vet's.
func unpinned(target, subject string, example bool) Warning {
	return Warning{Cause: Unpinned, Target: target, Subject: subject, Action: "run `gvisorgen pin`", Example: example,
		Message: "target " + target + ": " + subject + " has no digest"}
}

func waived(target, policy, reason string, example bool) Warning {
	return Warning{Cause: Waived, Target: target, Subject: policy, Action: reason, Example: example,
		Message: "target " + target + ": policy " + policy + " waived: " + reason}
}

const example = "example target: run `gvisorgen pin` before a real cluster syncs it"

// TestLines: the grouping, one case per rule.
func TestLines(t *testing.T) {
	for _, c := range []struct {
		name    string
		in      []Warning
		verbose bool
		want    []string
	}{
		{name: "nothing", in: nil, want: []string{}},
		{
			name: "one warning of an example: in full",
			in:   []Warning{unpinned("kind", "gvisor.release.sha512", true)},
			want: []string{"target kind: gvisor.release.sha512 has no digest"},
		},
		{
			name: "one example, one cause, several lines: one line with the subjects",
			in: []Warning{
				unpinned("kind", "gvisor.release.sha512", true),
				unpinned("kind", "gvisor.installer.image", true),
				unpinned("kind", "gvisor.readinessGate.image", true),
			},
			want: []string{"example target kind pins no digest for gvisor.installer.image, gvisor.readinessGate.image, gvisor.release.sha512: run `gvisorgen pin` [3 lines folded; -v prints every line]"},
		},
		{
			name: "the shipped examples: two lines, unpinned before waived",
			in: []Warning{
				waived("aks", "unpinned-image", example, true), waived("aks", "unpinned-release", example, true),
				waived("eks", "unpinned-image", example, true), waived("eks", "unpinned-release", example, true),
				waived("gke", "unpinned-image", example, true), waived("gke", "unpinned-release", example, true),
				unpinned("kind", "gvisor.release.sha512", true),
				unpinned("kind", "gvisor.installer.image", true),
			},
			want: []string{
				"example target kind pins no digest for gvisor.installer.image, gvisor.release.sha512: run `gvisorgen pin` [2 lines folded; -v prints every line]",
				"3 example targets waive policies unpinned-image, unpinned-release (aks, eks, gke): " + example + " [6 lines folded; -v prints every line]",
			},
		},
		{
			name: "one policy waived by two examples",
			in:   []Warning{waived("gke", "unpinned-release", example, true), waived("eks", "unpinned-release", example, true)},
			want: []string{"2 example targets waive policy unpinned-release (eks, gke): " + example + " [2 lines folded; -v prints every line]"},
		},
		{
			name: "another action (reason), another line",
			in: []Warning{
				waived("a", "unpinned-image", "example target: one", true), waived("b", "unpinned-image", "example target: one", true),
				waived("c", "unpinned-image", "example target: two", true), waived("d", "unpinned-image", "example target: two", true),
			},
			want: []string{
				"2 example targets waive policy unpinned-image (a, b): example target: one [2 lines folded; -v prints every line]",
				"2 example targets waive policy unpinned-image (c, d): example target: two [2 lines folded; -v prints every line]",
			},
		},
		{
			name: "a target of the user's is never folded, and sorts among the others by target",
			in: []Warning{
				unpinned("kind", "gvisor.release.sha512", true),
				unpinned("kind", "gvisor.installer.image", true),
				unpinned("dev", "gvisor.release.sha512", false),
				unpinned("dev", "gvisor.installer.image", false),
				unpinned("zz", "gvisor.installer.image", false),
			},
			want: []string{
				"target dev: gvisor.release.sha512 has no digest",
				"target dev: gvisor.installer.image has no digest",
				"example target kind pins no digest for gvisor.installer.image, gvisor.release.sha512: run `gvisorgen pin` [2 lines folded; -v prints every line]",
				"target zz: gvisor.installer.image has no digest",
			},
		},
		{
			name: "the user's warnings and one of an example: every one in full",
			in: []Warning{
				waived("gke", "unpinned-image", example, false), waived("gke", "unpinned-release", example, false),
				waived("eks", "unpinned-image", example, true),
			},
			want: []string{
				"target eks: policy unpinned-image waived: " + example,
				"target gke: policy unpinned-image waived: " + example,
				"target gke: policy unpinned-release waived: " + example,
			},
		},
		{
			name: "verbose: every line, by cause then target, a target's lines in the order found",
			in: []Warning{
				waived("gke", "unpinned-image", example, true), waived("eks", "unpinned-image", example, true),
				unpinned("kind", "gvisor.release.sha512", true),
				unpinned("kind", "gvisor.installer.image", true),
				{Cause: ContainerdFloor, Target: "b", Message: "target b: containerd"},
			},
			verbose: true,
			want: []string{
				"target b: containerd",
				"target kind: gvisor.release.sha512 has no digest",
				"target kind: gvisor.installer.image has no digest",
				"target eks: policy unpinned-image waived: " + example,
				"target gke: policy unpinned-image waived: " + example,
			},
		},
		{
			name: "a line printed twice is printed once",
			in: []Warning{
				{Cause: UnknownType, Target: "a", Subject: "example.com/v1 Widget", Message: "target a: Widget"},
				{Cause: UnknownType, Target: "a", Subject: "example.com/v1 Widget", Message: "target a: Widget"},
			},
			want: []string{"target a: Widget"},
		},
		{
			name: "every cause has words when folded; an unknown one too",
			in: []Warning{
				{Cause: UnusedWaiver, Target: "a", Subject: "p", Action: "remove the waiver", Message: "1", Example: true},
				{Cause: UnusedWaiver, Target: "b", Subject: "p", Action: "remove the waiver", Message: "2", Example: true},
				{Cause: ContainerdFloor, Target: "a", Action: "upgrade", Message: "3", Example: true},
				{Cause: ContainerdFloor, Target: "b", Action: "upgrade", Message: "4", Example: true},
				{Cause: AdoptForeignRunsc, Target: "a", Message: "5", Example: true},
				{Cause: AdoptForeignRunsc, Target: "b", Message: "6", Example: true},
				{Cause: RunscFlag, Target: "a", Subject: "net-raw", Message: "7", Example: true},
				{Cause: RunscFlag, Target: "a", Subject: "rootless", Message: "8", Example: true},
				{Cause: UnknownType, Target: "a", Subject: "v1 X", Message: "9", Example: true},
				{Cause: UnknownType, Target: "b", Subject: "v1 X", Message: "10", Example: true},
				{Cause: "brand-new", Target: "a", Subject: "s", Message: "11", Example: true},
				{Cause: "brand-new", Target: "b", Subject: "s", Message: "12", Example: true},
			},
			want: []string{
				"2 example targets adopt runsc handlers gvisorgen did not make (a, b) [2 lines folded; -v prints every line]",
				"2 example targets have warnings brand-new: s (a, b) [2 lines folded; -v prints every line]",
				"2 example targets may run a containerd older than their gVisor release's shim needs (a, b): upgrade [2 lines folded; -v prints every line]",
				"example target a sets runsc flags that weaken the sandbox: net-raw, rootless [2 lines folded; -v prints every line]",
				"2 example targets have objects of types gvisorgen does not know: v1 X (a, b) [2 lines folded; -v prints every line]",
				"2 example targets waive policy p that nothing breaks (a, b): remove the waiver [2 lines folded; -v prints every line]",
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Lines(c.in, c.verbose)
			if got == nil {
				got = []string{}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

// TestLinesKeepsEveryTarget: whatever is folded, every target and every
// subject of a warning is still named on some line, and folding never adds
// lines; -v prints each distinct message once.
func TestLinesKeepsEveryTarget(t *testing.T) {
	var in []Warning
	for _, tg := range []string{"aks", "eks", "gke", "kind", "dev"} {
		for _, s := range []string{"unpinned-image", "unpinned-release"} {
			in = append(in, waived(tg, s, example, tg != "dev"))
		}
		in = append(in, unpinned(tg, "gvisor.release.sha512", tg != "dev"))
	}
	folded, all := Lines(in, false), Lines(in, true)
	if len(all) != len(in) || len(folded) >= len(all) {
		t.Fatalf("%d warnings: %d lines folded, %d verbose", len(in), len(folded), len(all))
	}
	text := strings.Join(folded, "\n")
	for _, w := range in {
		if !strings.Contains(text, w.Target) || !strings.Contains(text, w.Subject) {
			t.Errorf("folded output lost %s %s:\n%s", w.Target, w.Subject, text)
		}
		if !w.Example && !strings.Contains(text, w.Message) {
			t.Errorf("a warning of the user's target %s was folded:\n%s", w.Target, text)
		}
	}
}
