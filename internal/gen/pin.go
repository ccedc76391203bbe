package gen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/format"

	"github.com/gvisorgen/gvisorgen/internal/eval"
	"github.com/gvisorgen/gvisorgen/internal/layout"
	"github.com/gvisorgen/gvisorgen/internal/pin"
	"github.com/gvisorgen/gvisorgen/internal/tree"
	"github.com/gvisorgen/gvisorgen/internal/vet"
)

// Source is what `pin` asks: the digest published beside a release
// artifact, and the digest a registry serves for an image tag.
type Source interface {
	ReleaseSHA512(ctx context.Context, url string) (string, error)
	ImageDigest(ctx context.Context, ref string) (string, error)
}

// PinOptions are the inputs of `gvisorgen pin`.
type PinOptions struct {
	Options
	// CAFile adds PEM certificates to the system roots (a mirror's private CA).
	CAFile string
	// Check compares the pins file with the source and writes nothing.
	Check bool
	// Source overrides the network source (tests).
	Source Source
}

// PinReport says what pin resolved and did.
type PinReport struct {
	// Resolved lists every pin asked for, "version arch/artifact" or the
	// image reference, with its digest.
	Resolved []string
	// Added are the pins that were missing (written, or reported by Check).
	Added []string
	// Own lists the images that a target pins by itself (an explicit
	// gvisor.installer.image.digest or gvisor.readinessGate.image.digest that
	// pins.cue does not hold), each with the field that pins it, which pin
	// does not ask a registry for: "repository:tag@digest (target T): the target
	// sets FIELD.digest itself".
	Own []string
	// Written is true when the pins file changed.
	Written bool
}

// PinMismatch is pin's "no": the source answered, but not what it should (a
// missing artifact, a malformed digest file), or it disagrees with a pin
// already committed (never overwritten silently), or two mirrors disagree;
// for Check also a pin that is missing.
type PinMismatch struct{ Problems []string }

func (e *PinMismatch) Error() string {
	return fmt.Sprintf("pin: %d problems:\n%s", len(e.Problems), strings.Join(e.Problems, "\n"))
}

// pins mirrors the schema's `pins`.
type pins struct {
	Releases map[string]map[string]map[string]string `json:"releases"`
	Images   map[string]string                       `json:"images"`
}

// Pin resolves, for every distinct (version, architecture, artifact) the
// selected targets install and every installer image tag they use, the
// digest the real source publishes, over TLS verified against the system
// roots (plus CAFile), and writes them to the pins file (cue/pins.cue) that
// the schema takes its defaults from. An existing pin that differs from the
// source is an error, not an overwrite. Errors: *PinMismatch (the source
// answered wrong, or a pin differs), *Unanswered (the source could not be
// asked), *Invalid (the inputs do not evaluate).
func Pin(opts PinOptions) (*PinReport, error) {
	ev, err := eval.Load(opts.Options.Options)
	if err != nil {
		return nil, invalid(err)
	}
	res, err := ev.Evaluate()
	if err != nil {
		return nil, invalid(err)
	}
	var have pins
	if err := ev.Instance().LookupPath(cue.ParsePath("pins")).Decode(&have); err != nil {
		return nil, fmt.Errorf("reading the pins of %s: %w", layout.PinsFile, err)
	}
	src := opts.Source
	if src == nil {
		s, err := pin.New(opts.CAFile)
		if err != nil {
			return nil, &Unanswered{Err: err}
		}
		src = s
	}
	want, err := wanted(res.Targets, &have)
	if err != nil {
		return nil, err
	}
	got, rep, err := resolve(context.Background(), src, want, &have)
	rep.Own = want.own
	if err != nil {
		return rep, err
	}
	if opts.Check {
		if len(rep.Added) > 0 {
			return rep, &PinMismatch{Problems: prefixed("missing in "+layout.PinsFile+": ", rep.Added)}
		}
		return rep, nil
	}
	if len(rep.Added) == 0 {
		return rep, nil
	}
	if err := writePins(opts.Root, got); err != nil {
		return rep, err
	}
	rep.Written = true
	return rep, nil
}

// want is what the targets need pinned: release artifacts by version, arch
// and artifact, each with the URLs it is fetched from; image tags.
type want struct {
	artifacts map[[3]string][]string // {version, arch, artifact} → URLs
	images    map[string]bool        // repository:tag
	own       []string               // images pinned by their target, not asked (PinReport.Own)
}

// wanted collects what the targets need pinned. An installer image whose
// target sets its own digest (one that pins.cue does not hold for its tag)
// is pinned already, by that target: its registry is not asked (it may have
// none, like an image imported onto the nodes with pullPolicy Never). Tags
// whose digest comes from pins.cue, or is missing, are asked, so that
// --check still compares every pin with its registry.
func wanted(ts []eval.Target, have *pins) (*want, error) {
	w := &want{artifacts: map[[3]string][]string{}, images: map[string]bool{}}
	for _, t := range ts {
		v, err := vet.ReleaseOf(t.Values)
		if err != nil {
			return nil, fmt.Errorf("target %s: %w", t.Name, err)
		}
		if !v.Gvisor.Enabled {
			continue
		}
		g := v.Gvisor
		for arch, names := range g.Release.Artifacts {
			for _, n := range names {
				k := [3]string{g.Version, arch, n}
				u := strings.Join([]string{g.Release.BaseURL, g.Version, arch, n}, "/")
				if !slices.Contains(w.artifacts[k], u) {
					w.artifacts[k] = append(w.artifacts[k], u)
				}
			}
		}
		for _, pi := range v.Images() {
			img := pi.Image
			ref := img.Repository + ":" + img.Tag
			if img.Digest != "" && img.Digest != have.Images[ref] {
				w.own = append(w.own, fmt.Sprintf("%s@%s (target %s): the target sets %s.digest itself", ref, img.Digest, t.Name, pi.Field))
				continue
			}
			w.images[ref] = true
		}
	}
	sort.Strings(w.own)
	return w, nil
}

// resolve asks the source for every wanted digest and merges them into a
// copy of have. Problems of every pin are collected before failing.
func resolve(ctx context.Context, src Source, w *want, have *pins) (*pins, *PinReport, error) {
	rep := &PinReport{}
	out := &pins{Releases: map[string]map[string]map[string]string{}, Images: map[string]string{}}
	for ver, archs := range have.Releases {
		for arch, arts := range archs {
			for art, sum := range arts {
				setRelease(out, ver, arch, art, sum)
			}
		}
	}
	for ref, d := range have.Images {
		out.Images[ref] = d
	}
	var problems []string
	var unreachable []string
	classify := func(err error) {
		var ans *pin.Answered
		if errors.As(err, &ans) {
			problems = append(problems, err.Error())
		} else {
			unreachable = append(unreachable, err.Error())
		}
	}
	keys := make([][3]string, 0, len(w.artifacts))
	for k := range w.artifacts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return strings.Join(keys[i][:], "/") < strings.Join(keys[j][:], "/") })
	for _, k := range keys {
		name := fmt.Sprintf("%s %s/%s", k[0], k[1], k[2])
		var sum, from string
		ok := true
		for _, u := range w.artifacts[k] {
			s, err := src.ReleaseSHA512(ctx, u)
			if err != nil {
				classify(err)
				ok = false
				continue
			}
			if sum != "" && s != sum {
				problems = append(problems, fmt.Sprintf("%s: %s publishes %s but %s publishes %s: the mirrors disagree", name, from, short(sum), u, short(s)))
				ok = false
				continue
			}
			sum, from = s, u
		}
		if !ok {
			continue
		}
		rep.Resolved = append(rep.Resolved, name+" "+sum)
		old := have.Releases[k[0]][k[1]][k[2]]
		switch {
		case old == "":
			rep.Added = append(rep.Added, name)
			setRelease(out, k[0], k[1], k[2], sum)
		case old != sum:
			problems = append(problems, fmt.Sprintf("%s: %s pins %s but %s now publishes %s: the artifact changed after it was pinned; find out why before you replace the pin by hand", name, layout.PinsFile, short(old), from, short(sum)))
		}
	}
	refs := make([]string, 0, len(w.images))
	for r := range w.images {
		refs = append(refs, r)
	}
	sort.Strings(refs)
	for _, ref := range refs {
		full, err := src.ImageDigest(ctx, ref)
		if err != nil {
			classify(err)
			continue
		}
		_, d, found := strings.Cut(full, "@")
		if !found {
			problems = append(problems, fmt.Sprintf("%s: the registry gave no digest (%s)", ref, full))
			continue
		}
		rep.Resolved = append(rep.Resolved, ref+" "+full)
		switch old := have.Images[ref]; {
		case old == "":
			rep.Added = append(rep.Added, ref)
			out.Images[ref] = d
		case old != d:
			problems = append(problems, fmt.Sprintf("%s: %s pins %s but the registry now serves %s: the tag moved after it was pinned; find out why before you replace the pin by hand", ref, layout.PinsFile, old, d))
		}
	}
	if len(unreachable) > 0 {
		return nil, rep, &Unanswered{Err: fmt.Errorf("pin: could not ask the source:\n%s", strings.Join(append(unreachable, problems...), "\n"))}
	}
	if len(problems) > 0 {
		return nil, rep, &PinMismatch{Problems: problems}
	}
	return out, rep, nil
}

func setRelease(p *pins, ver, arch, art, sum string) {
	if p.Releases[ver] == nil {
		p.Releases[ver] = map[string]map[string]string{}
	}
	if p.Releases[ver][arch] == nil {
		p.Releases[ver][arch] = map[string]string{}
	}
	p.Releases[ver][arch][art] = sum
}

func short(sum string) string {
	if len(sum) > 16 {
		return sum[:16] + "…"
	}
	return sum
}

func prefixed(p string, list []string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = p + s
	}
	return out
}

// pinsHeader starts the pins file; pin rewrites only a file that has it.
const pinsHeader = "// Code generated by gvisorgen pin. DO NOT EDIT.\n"

// writePins writes the pins file, formatted as `cue fmt` would, by rename.
func writePins(root string, p *pins) error {
	var b bytes.Buffer
	b.WriteString(pinsHeader)
	b.WriteString("// Digests resolved from their real source over verified TLS; `gvisorgen pin`\n// rewrites this file, `gvisorgen pin --check` compares it with the source.\n\npackage gvisorgen\n\n")
	b.WriteString("pins: releases: {\n")
	for _, ver := range sortedMap(p.Releases) {
		fmt.Fprintf(&b, "%s: {\n", strconv.Quote(ver))
		for _, arch := range sortedMap(p.Releases[ver]) {
			fmt.Fprintf(&b, "%s: {\n", strconv.Quote(arch))
			for _, art := range sortedMap(p.Releases[ver][arch]) {
				fmt.Fprintf(&b, "%s: %s\n", strconv.Quote(art), strconv.Quote(p.Releases[ver][arch][art]))
			}
			b.WriteString("}\n")
		}
		b.WriteString("}\n")
	}
	b.WriteString("}\npins: images: {\n")
	for _, ref := range sortedMap(p.Images) {
		fmt.Fprintf(&b, "%s: %s\n", strconv.Quote(ref), strconv.Quote(p.Images[ref]))
	}
	b.WriteString("}\n")
	src, err := format.Source(b.Bytes())
	if err != nil {
		return fmt.Errorf("formatting %s: %w", layout.PinsFile, err)
	}
	name := filepath.Join(root, filepath.FromSlash(layout.PinsFile))
	action := tree.Create
	if fi, err := os.Lstat(name); err == nil {
		action = tree.Update
		if !fi.Mode().IsRegular() {
			return &tree.UnsafeError{Path: layout.PinsFile, Why: "is not a regular file"}
		}
		old, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		if !bytes.HasPrefix(old, []byte(pinsHeader)) {
			return fmt.Errorf("%s exists and was not written by gvisorgen pin (no %q header): refusing to overwrite it", layout.PinsFile, strings.TrimSpace(pinsHeader))
		}
	}
	return tree.Apply(root, []tree.Change{{Action: action, Path: layout.PinsFile, New: src}})
}

func sortedMap[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
