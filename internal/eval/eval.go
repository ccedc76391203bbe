// Package eval loads the CUE module, the repository's targets and the user's
// values, and evaluates each target into its Kubernetes objects.
package eval

import (
	stderrors "errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/load"

	"github.com/gvisorgen/gvisorgen/internal/layout"
)

// ReservedNames cannot name a target: they are folders of the tree itself.
var ReservedNames = map[string]bool{"base": true}

// Options say where the inputs are. The zero value of every slice means "none".
type Options struct {
	// Root is the repository root; CUEDir and TargetsDir are relative to it.
	Root       string
	CUEDir     string // default "cue"
	TargetsDir string // default "targets"
	// ValuesFiles are -f files (.cue, .yaml, .yml, .json), unified into every
	// target; "-" is Stdin, read as YAML (or JSON).
	ValuesFiles []string
	// Stdin is the content of the values file "-".
	Stdin []byte
	// Sets are --set path=value assignments, unified into every target.
	Sets []string
	// Only restricts evaluation to these targets; empty means all.
	Only []string
	// NoShare renders every target on its own, even where targets could
	// share the parts they render alike (tests compare both ways).
	NoShare bool
}

// Object is one rendered Kubernetes object.
type Object struct {
	APIVersion string
	Kind       string
	Name       string
	Namespace  string
	// JSON is the object as exported by CUE.
	JSON []byte
}

// Target is one cluster's evaluated output.
type Target struct {
	Name    string
	Profile string
	// Values are the final, concrete values of the target, as JSON (the CUE
	// value itself is dropped: it holds the whole evaluation in memory).
	Values []byte
	// Objects in declaration order: what the cluster gets (overlays/).
	Objects []Object
	// Delivery are the target's Argo CD and Flux objects (delivery/).
	Delivery []Object
	// Smoke are the target's smoke-test objects (smoke/).
	Smoke []Object
	// Example says that the target is one of the module's shipped examples,
	// as shipped (see shippedExample): its warnings may be folded.
	Example bool
	// where is where the target's inputs set each field (positions), kept
	// instead of the inputs themselves, which would keep their CUE runtime.
	where map[string][]string
}

// Where says where the target's inputs set a field (a dotted values path),
// or the closest enclosing field they set, as lines "    file:line:col" to
// follow a message about it (CUE's error format): a rule that the Go side
// checks names the line to change, as CUE's errors do. "" when no input of
// the user's sets it.
func (t *Target) Where(path string) string {
	sels, err := userSels(path)
	if err != nil || t.where == nil {
		return ""
	}
	for n := len(sels); n > 0; n-- {
		if at := t.where[cue.MakePath(sels[:n]...).String()]; len(at) > 0 {
			var b strings.Builder
			for _, a := range at {
				b.WriteString("\n    " + a)
			}
			return b.String()
		}
	}
	return ""
}

// Result is the evaluation of every selected target, sorted by name.
type Result struct {
	Targets []Target
	// All names every declared target, selected or not, sorted.
	All []string
	// Fleet are the fleet-wide delivery objects (the Argo CD ApplicationSet).
	Fleet []Object
	// Rendered counts the parts (#Render, #Delivery, #Smoke of a target)
	// evaluated by CUE, Shared those taken from another target's rendering.
	Rendered, Shared int
}

// Error is an input error: the inputs do not evaluate. Its message lists every
// CUE error with its position.
type Error struct {
	Msg string
}

func (e *Error) Error() string { return e.Msg }

type source struct {
	name string
	pos  string // where the target is declared, for duplicate-name errors
	val  cue.Value
}

// Evaluator holds the loaded module; it evaluates targets from it.
type Evaluator struct {
	opts    Options
	cwd     string
	ctx     *cue.Context
	inst    cue.Value
	schema  cue.Value // #Target: #Values and the name
	profile cue.Value // #Profiles
	render  cue.Value // #Render
	deliver cue.Value // #Delivery
	smoke   cue.Value // #Smoke
	memo    *memo
	// describe turns pattern failures into what is wanted; built on the
	// first error (see describer), not on every load.
	describe describer
	// userFiles are the module's files that declare targets: positions in
	// them are the user's, not the schema's.
	userFiles map[string]bool
	// pkg is the module's import path: hidden definitions are looked up
	// in it.
	pkg string
	// cfg is how the module was loaded: Variant loads it again.
	cfg *load.Config
}

// Load loads and builds the CUE module.
func Load(opts Options) (*Evaluator, error) {
	if opts.CUEDir == "" {
		opts.CUEDir = layout.CUEDir
	}
	if opts.TargetsDir == "" {
		opts.TargetsDir = layout.TargetsDir
	}
	cwd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	e := &Evaluator{opts: opts, cwd: cwd, ctx: cuecontext.New(), memo: newMemo(), userFiles: map[string]bool{}}
	dir := filepath.Join(opts.Root, opts.CUEDir)
	if _, err := os.Stat(dir); err != nil {
		if stderrors.Is(err, fs.ErrNotExist) {
			abs, _ := filepath.Abs(filepath.Join(opts.Root, opts.CUEDir))
			return nil, fmt.Errorf("no CUE module: %s does not exist%s", abs, rootHint(opts.Root, opts.CUEDir))
		}
		return nil, fmt.Errorf("loading CUE module: %w", err)
	}
	if err := misnamed(dir, e.rel(dir)); err != nil {
		return nil, err
	}
	cfg := &load.Config{Dir: dir}
	if usesTag(dir, buildTag) {
		cfg.Tags = []string{buildTag}
	}
	e.cfg = cfg
	insts := load.Instances([]string{"."}, cfg)
	if len(insts) != 1 {
		return nil, fmt.Errorf("loading CUE module %s: want one instance, got %d", dir, len(insts))
	}
	if err := insts[0].Err; err != nil {
		return nil, e.cueError(err)
	}
	e.pkg = insts[0].ImportPath
	e.inst = e.ctx.BuildInstance(insts[0])
	if err := e.inst.Err(); err != nil {
		return nil, e.cueError(err)
	}
	e.schema = e.inst.LookupPath(cue.ParsePath("#Target"))
	e.profile = e.inst.LookupPath(cue.ParsePath("#Profiles"))
	e.render = e.inst.LookupPath(cue.ParsePath("#Render"))
	e.deliver = e.inst.LookupPath(cue.ParsePath("#Delivery"))
	e.smoke = e.inst.LookupPath(cue.ParsePath("#Smoke"))
	for _, v := range []cue.Value{e.schema, e.profile, e.render, e.deliver, e.smoke} {
		if !v.Exists() {
			return nil, fmt.Errorf("CUE module %s lacks #Target, #Profiles, #Render, #Delivery or #Smoke", dir)
		}
	}
	return e, nil
}

// Variant loads the module again, lets edit change its files' syntax, and
// builds it: the values schema without its defaults, say. The Evaluator's own
// instance is not affected.
func (e *Evaluator) Variant(edit func([]*ast.File)) (cue.Value, error) {
	insts := load.Instances([]string{"."}, e.cfg)
	if err := insts[0].Err; err != nil {
		return cue.Value{}, e.cueError(err)
	}
	edit(insts[0].Files)
	// The edit may break parts the caller does not look at (a profile
	// without the default it relies on): the caller validates what it uses.
	return e.ctx.BuildInstance(insts[0]), nil
}

// misnamed refuses a file of the CUE folder that the CUE loader would skip
// without a word although its name says CUE: an extension of another case
// (targets.CUE). Hidden files, backups (targets.cue~, targets.cue.orig) and
// other extensions are skipped by the loader as by the stock cue CLI, which
// the module also serves: silence is right there.
func misnamed(dir, rel string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("loading CUE module: %w", err)
	}
	var msgs []string
	for _, ent := range entries {
		ext := filepath.Ext(ent.Name())
		if !ent.IsDir() && !strings.HasPrefix(ent.Name(), ".") && ext != ".cue" && strings.ToLower(ext) == ".cue" {
			msgs = append(msgs, fmt.Sprintf("%s/%s: not read: CUE files end in .cue, in lower case; rename it to %s", filepath.ToSlash(rel), ent.Name(), strings.TrimSuffix(ent.Name(), ext)+".cue"))
		}
	}
	if len(msgs) > 0 {
		return &Error{Msg: strings.Join(msgs, "\n")}
	}
	return nil
}

// buildTag is set when loading the module: files for the stock cue CLI only
// (cue/rendered.cue, @if(!gvisorgen)) are left out.
const buildTag = "gvisorgen"

// usesTag reports whether a CUE file of dir mentions the tag in an @if
// attribute: CUE refuses a tag that no file uses, and a module may lack them.
func usesTag(dir, tag string) bool {
	attr := regexp.MustCompile(`@if\([^)]*\b` + regexp.QuoteMeta(tag) + `\b[^)]*\)`)
	files, _ := filepath.Glob(filepath.Join(dir, "*.cue"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && attr.Match(b) {
			return true
		}
	}
	return false
}

// Context is the CUE context of the loaded module.
func (e *Evaluator) Context() *cue.Context { return e.ctx }

// Instance is the built CUE module.
func (e *Evaluator) Instance() cue.Value { return e.inst }

// Profiles is the #Profiles definition.
func (e *Evaluator) Profiles() cue.Value { return e.profile }

// Schema is the #Target definition: #Values and the target's name.
func (e *Evaluator) Schema() cue.Value { return e.schema }

// rootHint says where the repository's root is when gvisorgen runs below it
// (the module folder is found in a parent), or how to name it.
func rootHint(root, cueDir string) string {
	abs, err := filepath.Abs(root)
	if err != nil {
		return ""
	}
	for d, up := filepath.Dir(abs), ".."; d != filepath.Dir(d); d, up = filepath.Dir(d), up+"/.." {
		if fi, err := os.Stat(filepath.Join(d, cueDir)); err == nil && fi.IsDir() {
			return fmt.Sprintf(": %s is below the repository's root %s; run gvisorgen there, or pass --root %s", abs, d, up)
		}
	}
	return ": run gvisorgen from the repository's root (where " + cueDir + "/ is), or pass --root <that folder>"
}
