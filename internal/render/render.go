// Package render turns a target's objects into its kustomize overlay and the
// rendered output of that overlay, as in-memory files.
package render

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/gvisorgen/gvisorgen/internal/eval"
	"github.com/gvisorgen/gvisorgen/internal/layout"
	"github.com/gvisorgen/gvisorgen/internal/tree"
)

// Plain writes objects as they are (no kustomize), one file per object under
// dir: the delivery objects and the smoke test.
func Plain(dir string, objs []eval.Object) ([]tree.File, error) {
	return NewRenderer().plain(dir, objs)
}

// plain is Plain with the Renderer's memory of objects it converted before:
// targets of a fleet share most objects byte for byte.
func (rd *Renderer) plain(dir string, objs []eval.Object) ([]tree.File, error) {
	var files []tree.File
	for _, o := range objs {
		if !checkName(o.Kind, o.Name, o.Namespace) {
			return nil, &NameError{Kind: o.Kind, Name: o.Name, Namespace: o.Namespace, Ours: true}
		}
		rd.mu.Lock()
		data, ok := rd.yaml[string(o.JSON)]
		rd.mu.Unlock()
		if !ok {
			y, err := yaml.JSONToYAML(o.JSON)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", o.Kind, o.Name, err)
			}
			data = tree.WithHeader(y)
			rd.mu.Lock()
			if rd.yaml == nil {
				rd.yaml = map[string][]byte{}
			}
			rd.yaml[string(o.JSON)] = data
			rd.mu.Unlock()
		}
		files = append(files, tree.File{Path: path.Join(dir, FileName(o.Kind, o.Name, "")), Data: data})
	}
	return files, nil
}

// plainFor is plain for one target's objects; errors name the target.
func (rd *Renderer) plainFor(target, dir string, objs []eval.Object) ([]tree.File, error) {
	files, err := rd.plain(dir, objs)
	var ne *NameError
	if errors.As(err, &ne) {
		ne.Target = target
		return nil, ne
	}
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", target, err)
	}
	return files, nil
}

// Renderer renders targets. It remembers the order kustomize gives each set of
// resources, so that an overlay without user patches — whose rendered files
// are its own resource files, reordered — needs one kustomize run per distinct
// set, not one per target. The kustomize parity test guards that shortcut.
// A Renderer is safe for concurrent use.
type Renderer struct {
	mu     sync.Mutex
	orders map[string][]int
	// yaml holds the file of every object converted, by its JSON.
	yaml map[string][]byte
	// Always runs kustomize for every target (tests compare both paths).
	Always bool
}

// NewRenderer returns a Renderer with an empty order cache.
func NewRenderer() *Renderer {
	return &Renderer{orders: map[string][]int{}, yaml: map[string][]byte{}}
}

// Output is one target's files.
type Output struct {
	Files []tree.File
	// Patches are the hand-written files of the overlay's patches/ folder
	// (slash-separated, from the repository root); none means the rendered
	// objects are the overlay's own.
	Patches []string
	// PatchFiles are the same files with their content.
	PatchFiles []tree.File
}

// Target renders one target: its overlay files and its rendered output. root
// is the repository root, read for the target's hand-written patches.
func (rd *Renderer) Target(root string, t eval.Target) (*Output, error) {
	overlay := path.Join(layout.OverlaysDir, t.Name)
	files, err := rd.plainFor(t.Name, overlay, t.Objects)
	if err != nil {
		return nil, err
	}
	var resources []string
	for _, f := range files {
		resources = append(resources, path.Base(f.Path))
	}
	if err := foreignKustomization(root, overlay); err != nil {
		return nil, fmt.Errorf("target %s: %w", t.Name, err)
	}
	patches, err := userPatches(root, overlay)
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", t.Name, err)
	}
	kust := kustomization(resources, patches)
	files = append(files, tree.File{Path: path.Join(overlay, layout.Kustomization), Data: kust})

	rendered, err := rd.rendered(t, files, patches, overlay)
	if err != nil {
		var ne *NameError
		if errors.As(err, &ne) {
			ne.Target, ne.Patches = t.Name, patches.names(overlay)
			return nil, ne
		}
		return nil, &Error{Msg: fmt.Sprintf("target %s: kustomize build %s: %v", t.Name, overlay, err)}
	}
	for _, r := range rendered {
		files = append(files, tree.File{Path: path.Join(layout.GeneratedDir, t.Name, r.Path), Data: r.Data})
	}
	for _, part := range []struct {
		dir  string
		objs []eval.Object
	}{{layout.DeliveryDir, t.Delivery}, {layout.SmokeDir, t.Smoke}} {
		more, err := rd.plainFor(t.Name, path.Join(part.dir, t.Name), part.objs)
		if err != nil {
			return nil, err
		}
		files = append(files, more...)
	}
	return &Output{Files: files, Patches: patches.names(overlay), PatchFiles: patches.fromRoot(overlay)}, nil
}

// Error is an input error found while rendering: a patch or a hand-written
// file of an overlay that cannot work.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

// NameError is an object whose kind, name or namespace cannot be part of a
// file name: it could make a path that leaves its folder.
type NameError struct {
	Target                string
	Kind, Name, Namespace string
	// Ours is true for an object gvisorgen emitted (its values are at fault);
	// otherwise it came out of kustomize over the overlay's patches.
	Ours    bool
	Patches []string
}

func (e *NameError) Error() string {
	msg := fmt.Sprintf("target %s: %s %q (namespace %q) cannot name a file: kinds are letters and digits; names and namespaces are letters, digits, '.', '-', '_' and ':', starting and ending with a letter or digit, at most 253 characters (as Kubernetes names are)",
		e.Target, e.Kind, e.Name, e.Namespace)
	if !e.Ours {
		msg += fmt.Sprintf("; the object comes out of kustomize build %s with your patches (%s): kustomize keeps no record of which patch made it, so look at each",
			path.Join(layout.OverlaysDir, e.Target), strings.Join(e.Patches, ", "))
	}
	return msg
}

var (
	kindRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*$`)
	nameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._:-]*[A-Za-z0-9])?$`)
)

// checkName refuses what cannot be part of a file name in one folder.
func checkName(kind, name, namespace string) bool {
	return kindRE.MatchString(kind) && len(kind) <= 253 &&
		nameRE.MatchString(name) && len(name) <= 253 &&
		(namespace == "" || nameRE.MatchString(namespace) && len(namespace) <= 253)
}

// FileName is the naming rule of per-resource files: the lower-case kind and
// the name, joined by '-'; the namespace is added when the name alone is not
// unique in the target.
func FileName(kind, name, namespace string) string {
	parts := []string{strings.ToLower(kind)}
	if namespace != "" {
		parts = append(parts, namespace)
	}
	parts = append(parts, name)
	return strings.Join(parts, "-") + ".yaml"
}

// patchSet is what a target's patches/ folder holds.
type patchSet struct {
	// component is true when patches/ holds a kustomization file: the folder
	// is then a kustomize Component the user writes in full, and every file
	// under it (sub-folders, .patch files, JSON 6902) is there for it.
	component bool
	// files are the patch files (relative to the overlay) and their content.
	files []tree.File
}

// names are the patch files' paths from the repository root.
func (ps patchSet) names(overlay string) []string {
	out := make([]string, 0, len(ps.files))
	for _, f := range ps.files {
		out = append(out, path.Join(overlay, f.Path))
	}
	return out
}

// fromRoot are the patch files with paths from the repository root.
func (ps patchSet) fromRoot(overlay string) []tree.File {
	out := make([]tree.File, 0, len(ps.files))
	for _, f := range ps.files {
		out = append(out, tree.File{Path: path.Join(overlay, f.Path), Data: f.Data})
	}
	return out
}

// foreignKustomization refuses a kustomization file of another spelling
// beside the generated one: kustomize would stop at "Found multiple
// kustomization files" while gvisorgen renders its own.
func foreignKustomization(root, overlay string) error {
	for _, n := range layout.KustomizationNames {
		if n == layout.Kustomization {
			continue
		}
		p := path.Join(overlay, n)
		if _, err := os.Lstat(filepath.Join(root, filepath.FromSlash(p))); err == nil {
			return &Error{Msg: fmt.Sprintf("%s: kustomize would find two kustomization files in %s (this and the generated %s) and refuse to build it; move what it holds into %s/ as a kustomize Component (%s/%s) or into patch files there",
				p, overlay, layout.Kustomization, path.Join(overlay, layout.PatchesDir), path.Join(overlay, layout.PatchesDir), layout.Kustomization)}
		}
	}
	return nil
}

// userPatches reads the overlay's patches/ folder: its top-level .yaml,
// .yml and .json files, or, when it holds a kustomization file, every file
// under it. Links are refused: they could make the build read outside the
// repository, which a reviewer does not see in the pull request.
func userPatches(root, overlay string) (patchSet, error) {
	var ps patchSet
	rel := path.Join(overlay, layout.PatchesDir)
	dir := filepath.Join(root, filepath.FromSlash(rel))
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return ps, nil
	case err != nil:
		return ps, fmt.Errorf("reading patches: %w", err)
	case !fi.IsDir():
		return ps, &Error{Msg: fmt.Sprintf("%s: must be a folder (of patch files, or a kustomize Component), not a link or a file", rel)}
	}
	for _, n := range layout.KustomizationNames {
		if _, err := os.Lstat(filepath.Join(dir, n)); err == nil {
			ps.component = true
		}
	}
	var notRead []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		r, _ := filepath.Rel(dir, p)
		r = filepath.ToSlash(r)
		switch {
		case p == dir:
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			return &Error{Msg: fmt.Sprintf("%s/%s: links are not allowed in patches/ (the build could read outside the repository); copy the file", rel, r)}
		case d.IsDir():
			if !ps.component && !strings.HasPrefix(d.Name(), ".") {
				notRead = append(notRead, fmt.Sprintf("%s/%s: a folder, not read: plain patches are the .yaml, .yml and .json files directly in %s; its files are read only when %s is a kustomize Component (%s/%s naming them)",
					rel, r, rel, rel, rel, layout.Kustomization))
			}
			if !ps.component || strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		case !d.Type().IsRegular():
			return &Error{Msg: fmt.Sprintf("%s/%s: not a regular file", rel, r)}
		case strings.HasPrefix(d.Name(), "."):
			return nil
		}
		if !ps.component {
			if msg := notAPatch(d.Name()); msg != "" {
				notRead = append(notRead, fmt.Sprintf("%s/%s: %s", rel, r, msg))
			}
			switch filepath.Ext(d.Name()) {
			case ".yaml", ".yml", ".json":
			default:
				return nil
			}
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		// kustomize says only that it cannot parse the patch: say where.
		switch filepath.Ext(d.Name()) {
		case ".yaml", ".yml", ".json":
			if msg := eval.CheckManifestYAML(rel+"/"+r, b); msg != "" {
				return &Error{Msg: msg + " (a patch file: kustomize could not read it)"}
			}
		}
		ps.files = append(ps.files, tree.File{Path: path.Join(layout.PatchesDir, r), Data: b})
		return nil
	})
	var re *Error
	if err != nil && !errors.As(err, &re) {
		err = fmt.Errorf("reading patches: %w", err)
	}
	if err == nil && len(notRead) > 0 {
		// Target prefixes the first line with the target, as every line is.
		err = &Error{Msg: strings.Join(notRead, "\ntarget "+path.Base(overlay)+": ")}
	}
	sort.Slice(ps.files, func(i, j int) bool { return ps.files[i].Path < ps.files[j].Path })
	return ps, err
}

// OrderFirst is kustomize's legacy order (its default list, api v0.21.2) with
// the readiness gate's admission policy and its binding placed before every
// RBAC kind: a `kubectl apply` of the output creates the policy that narrows
// the installer's node rights before the grant (docs/readiness-gate.md).
// The rest of the order is kustomize's own, and OrderLast its default.
var OrderFirst = []string{
	"Namespace", "ResourceQuota", "StorageClass", "CustomResourceDefinition",
	"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
	"ServiceAccount", "PodSecurityPolicy", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding",
	"ConfigMap", "Secret", "Endpoints", "Service", "LimitRange", "PriorityClass", "PersistentVolume",
	"PersistentVolumeClaim", "Deployment", "StatefulSet", "CronJob", "PodDisruptionBudget",
}

// OrderLast is kustomize's default orderLast (it must be spelled out once
// orderFirst is).
var OrderLast = []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}

// notAPatch says why a file of a plain patches/ folder (no Component) that
// is not read looks like a patch, or "" when skipping it is right. Refused:
// a patch extension of another case (fix.YAML: kustomize would read it, the
// rule is the lower-case extension) and a .patch file (a JSON 6902 patch,
// which only a Component can aim at its target). Skipped without a word: a
// hidden file (the caller: an editor's swap file, .gitkeep) and any other
// name (README.md, an editor or merge backup such as fix.yaml~ or
// fix.yaml.orig), none of them a patch by its extension, the documented rule.
func notAPatch(name string) string {
	ext := filepath.Ext(name)
	switch lower := strings.ToLower(ext); {
	case lower != ext && (lower == ".yaml" || lower == ".yml" || lower == ".json"):
		return fmt.Sprintf("not read: plain patches end in .yaml, .yml or .json, in lower case; rename it to %s", strings.TrimSuffix(name, ext)+lower)
	case lower == ".patch":
		return fmt.Sprintf("not read: a .patch file (JSON 6902) needs a target, which only a kustomize Component gives: write %s/%s naming it", layout.PatchesDir, layout.Kustomization)
	}
	return ""
}

// kustomization is the generated kustomization.yaml. sortOptions is pinned so
// that krusty and the kustomize CLI (what Argo CD and Flux run) print the same
// order.
func kustomization(resources []string, ps patchSet) []byte {
	var b bytes.Buffer
	b.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n")
	b.WriteString("sortOptions:\n  order: legacy\n  legacySortOptions:\n    orderFirst:\n")
	for _, k := range OrderFirst {
		fmt.Fprintf(&b, "    - %s\n", k)
	}
	b.WriteString("    orderLast:\n")
	for _, k := range OrderLast {
		fmt.Fprintf(&b, "    - %s\n", k)
	}
	b.WriteString("resources:\n")
	for _, r := range resources {
		fmt.Fprintf(&b, "- %s\n", r)
	}
	if ps.component {
		fmt.Fprintf(&b, "components:\n- %s\n", layout.PatchesDir)
	} else if len(ps.files) > 0 {
		b.WriteString("patches:\n")
		for _, f := range ps.files {
			fmt.Fprintf(&b, "- path: %s\n", f.Path)
		}
	}
	return tree.WithHeader(b.Bytes())
}

// rendered is the output of kustomize over the overlay, from the order cache
// when the overlay has no patches and its resource set was built before.
func (rd *Renderer) rendered(t eval.Target, overlay []tree.File, ps patchSet, dir string) ([]tree.File, error) {
	pure := len(ps.files) == 0 && !rd.Always
	var key strings.Builder
	for _, o := range t.Objects {
		fmt.Fprintf(&key, "%s/%s/%s/%s\n", o.APIVersion, o.Kind, o.Namespace, o.Name)
	}
	if pure {
		rd.mu.Lock()
		order, ok := rd.orders[key.String()]
		rd.mu.Unlock()
		if ok {
			out := make([]tree.File, 0, len(order))
			names := outputNames(t.Objects, order)
			for i, idx := range order {
				// The overlay's resource files come first, in object order.
				out = append(out, tree.File{Path: names[i], Data: overlay[idx].Data})
			}
			return out, nil
		}
	}
	out, order, err := build(overlay, ps, dir, t.Objects)
	if err != nil {
		return nil, err
	}
	if pure && order != nil {
		rd.mu.Lock()
		rd.orders[key.String()] = order
		rd.mu.Unlock()
	}
	return out, nil
}

// outputNames names the rendered files of objects in the given order, with the
// namespace added where kind and name alone collide.
func outputNames(objs []eval.Object, order []int) []string {
	count := map[string]int{}
	for _, o := range objs {
		count[FileName(o.Kind, o.Name, "")]++
	}
	var out []string
	for _, idx := range order {
		o := objs[idx]
		name := FileName(o.Kind, o.Name, "")
		if count[name] > 1 {
			name = FileName(o.Kind, o.Name, o.Namespace)
		}
		out = append(out, name)
	}
	return out
}

// build runs kustomize in memory over the overlay and returns one file per
// resource, in the order kustomize prints them, and that order as indexes
// into objs (nil when the output is not a reordering of objs).
func build(overlay []tree.File, ps patchSet, dir string, objs []eval.Object) ([]tree.File, []int, error) {
	fs := filesys.MakeFsInMemory()
	for _, f := range overlay {
		if err := fs.WriteFile("/"+f.Path, f.Data); err != nil {
			return nil, nil, err
		}
	}
	for _, f := range ps.files {
		if err := fs.WriteFile("/"+path.Join(dir, f.Path), f.Data); err != nil {
			return nil, nil, err
		}
	}
	opts := krusty.MakeDefaultOptions()
	// The kustomization's sortOptions decide the order, as in the CLI.
	opts.Reorder = krusty.ReorderOptionUnspecified
	m, err := krusty.MakeKustomizer(opts).Run(fs, "/"+dir)
	if err != nil {
		return nil, nil, err
	}
	index := map[string]int{}
	for i, o := range objs {
		index[o.Kind+"/"+o.Namespace+"/"+o.Name] = i
	}
	var order []int
	names := map[string]int{}
	for _, r := range m.Resources() {
		if !checkName(r.GetKind(), r.GetName(), r.GetNamespace()) {
			return nil, nil, &NameError{Kind: r.GetKind(), Name: r.GetName(), Namespace: r.GetNamespace()}
		}
		names[FileName(r.GetKind(), r.GetName(), "")]++
	}
	var out []tree.File
	seen := map[string]bool{}
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			return nil, nil, err
		}
		if i, ok := index[r.GetKind()+"/"+r.GetNamespace()+"/"+r.GetName()]; ok {
			order = append(order, i)
		}
		name := FileName(r.GetKind(), r.GetName(), "")
		if names[name] > 1 {
			name = FileName(r.GetKind(), r.GetName(), r.GetNamespace())
		}
		if seen[name] {
			return nil, nil, fmt.Errorf("two resources render to the same file %s", name)
		}
		seen[name] = true
		out = append(out, tree.File{Path: name, Data: tree.WithHeader(y)})
	}
	if len(order) != len(objs) || len(out) != len(objs) {
		order = nil
	}
	return out, order, nil
}
