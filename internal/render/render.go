// Package render turns a target's objects into its kustomize overlay and the
// rendered output of that overlay, as in-memory files.
package render

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
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

// Target renders one target with a fresh Renderer.
func Target(root string, t eval.Target) ([]tree.File, error) {
	return NewRenderer().Target(root, t)
}

// Target renders one target: its overlay files and its rendered output. root
// is the repository root, read for the target's hand-written patches.
func (rd *Renderer) Target(root string, t eval.Target) ([]tree.File, error) {
	overlay := path.Join(layout.OverlaysDir, t.Name)
	files, err := rd.plain(overlay, t.Objects)
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", t.Name, err)
	}
	var resources []string
	for _, f := range files {
		resources = append(resources, path.Base(f.Path))
	}
	patches, err := userPatches(filepath.Join(root, filepath.FromSlash(overlay)))
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", t.Name, err)
	}
	kust := kustomization(resources, patches)
	files = append(files, tree.File{Path: path.Join(overlay, layout.Kustomization), Data: kust})

	rendered, err := rd.rendered(t, files, patches, overlay)
	if err != nil {
		return nil, fmt.Errorf("target %s: kustomize build %s: %w", t.Name, overlay, err)
	}
	for _, r := range rendered {
		files = append(files, tree.File{Path: path.Join(layout.GeneratedDir, t.Name, r.Path), Data: r.Data})
	}
	for _, part := range []struct {
		dir  string
		objs []eval.Object
	}{{layout.DeliveryDir, t.Delivery}, {layout.SmokeDir, t.Smoke}} {
		more, err := rd.plain(path.Join(part.dir, t.Name), part.objs)
		if err != nil {
			return nil, fmt.Errorf("target %s: %w", t.Name, err)
		}
		files = append(files, more...)
	}
	return files, nil
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
	// component is true when patches/kustomization.yaml exists: the folder is
	// then a kustomize Component the user writes in full.
	component bool
	// files are the patch files (relative to the overlay) and their content.
	files []tree.File
}

func userPatches(overlayDir string) (patchSet, error) {
	var ps patchSet
	dir := filepath.Join(overlayDir, layout.PatchesDir)
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return ps, nil
	}
	if err != nil {
		return ps, fmt.Errorf("reading patches: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		switch filepath.Ext(e.Name()) {
		case ".yaml", ".yml", ".json":
		default:
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return ps, fmt.Errorf("reading patches: %w", err)
		}
		if e.Name() == "kustomization.yaml" || e.Name() == "kustomization.yml" {
			ps.component = true
		}
		ps.files = append(ps.files, tree.File{Path: path.Join(layout.PatchesDir, e.Name()), Data: b})
	}
	sort.Slice(ps.files, func(i, j int) bool { return ps.files[i].Path < ps.files[j].Path })
	return ps, nil
}

// kustomization is the generated kustomization.yaml. sortOptions is pinned so
// that krusty and the kustomize CLI (what Argo CD and Flux run) print the same
// order.
func kustomization(resources []string, ps patchSet) []byte {
	var b bytes.Buffer
	b.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n")
	b.WriteString("sortOptions:\n  order: legacy\n")
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
