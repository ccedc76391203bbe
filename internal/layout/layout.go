// Package layout names the repository's folders: what gvisorgen reads and
// what it writes. It is the only place Go spells them; the CUE module and the
// CI scripts name the same folders, and a test checks that they agree.
package layout

import (
	"path"
	"strings"
)

// The inputs.
const (
	// CUEDir holds the CUE module (schemas, profiles, inline targets, the
	// installer scripts).
	CUEDir = "cue"
	// TargetsDir holds one values file per target.
	TargetsDir = "targets"
	// PatchesDir is the hand-written part of an overlay: overlays/<t>/patches.
	PatchesDir = "patches"
)

// The outputs: each holds one folder per target (delivery/ also holds the
// fleet-wide objects directly).
const (
	OverlaysDir  = "overlays"
	GeneratedDir = "generated"
	DeliveryDir  = "delivery"
	SmokeDir     = "smoke"
)

// SchemasDir holds what generate derives from the CUE module alone: the JSON
// Schema of a values file (ValuesSchema).
const SchemasDir = "schemas"

// ValuesSchema is the JSON Schema of a values file, for editors.
const ValuesSchema = SchemasDir + "/values.schema.json"

// SchemaModeline is the first line of a values file in TargetsDir that
// points yaml-language-server (VS Code's YAML extension, Neovim, Helix, …)
// at ValuesSchema.
const SchemaModeline = "# yaml-language-server: $schema=../" + ValuesSchema

// PinsFile is the CUE file `gvisorgen pin` owns: the digests it resolved,
// which the schema uses as defaults. Being in the CUE module, it is an input
// of every run (and of the cache key, and of each side of diff) by itself.
const PinsFile = CUEDir + "/pins.cue"

// Kustomization is the name of the kustomization file gvisorgen writes.
const Kustomization = "kustomization.yaml"

// KustomizationNames are every file name kustomize accepts as a
// kustomization; it refuses a folder holding more than one.
var KustomizationNames = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// Outputs are the folders generate owns, in the order they are written.
var Outputs = []string{OverlaysDir, GeneratedDir, DeliveryDir, SmokeDir}

// Written are the top-level folders generate writes: the per-target Outputs
// and SchemasDir.
var Written = append(append([]string(nil), Outputs...), SchemasDir)

// Inputs are the top-level paths the generator reads: the CUE module, the
// targets folder, and overlays/ for its patches/ folders. Together with
// Written they are what a git ref must provide to `diff`.
var Inputs = []string{CUEDir, TargetsDir, OverlaysDir}

// Roots are the folders a target owns: generate writes and prunes only there.
func Roots(target string) []string {
	out := make([]string, 0, len(Outputs))
	for _, d := range Outputs {
		out = append(out, path.Join(d, target))
	}
	return out
}

// Patches is the patches folder of a target's overlay, slash-separated.
func Patches(target string) string { return path.Join(OverlaysDir, target, PatchesDir) }

// Output splits a slash-separated output path into its top folder, its
// target ("" for a file directly in the top folder, such as the fleet's
// ApplicationSet) and the rest. ok is false for a path outside the outputs.
func Output(p string) (top, target, rest string, ok bool) {
	top, after, found := strings.Cut(p, "/")
	if !found || !isOutput(top) {
		return "", "", "", false
	}
	target, rest, found = strings.Cut(after, "/")
	if !found {
		return top, "", after, true
	}
	return top, target, rest, true
}

func isOutput(top string) bool {
	for _, d := range Outputs {
		if d == top {
			return true
		}
	}
	return false
}
