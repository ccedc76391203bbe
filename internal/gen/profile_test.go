package gen

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gvisorgen/gvisorgen/internal/docs"
	"github.com/gvisorgen/gvisorgen/internal/eval"
	"github.com/gvisorgen/gvisorgen/internal/warn"
)

// TestProfileAddedInCUEAlone: a profile declared only in CUE (#ProfileFacts
// and #Profiles) is a profile everywhere: the values reference lists it,
// error messages name it, its managed StorageClass is refused by policy, its
// pin requirement holds, and its targets generate.
func TestProfileAddedInCUEAlone(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "cue"), os.DirFS(filepath.Join(repoRoot, "cue"))); err != nil {
		t.Fatal(err)
	}
	const onprem = `package gvisorgen

#ProfileFacts: onprem: {
	description: "an on-premises cluster"
	requirePins: false
	managedStorageClasses: ["local-ssd"]
}
#Profiles: onprem: {
	gvisor: host: {
		installDir:       *"/opt/gvisor/bin" | _
		installDirOnPath: *false | _
	}
	smoke: pvc: *false | _
	storageClass: provisioner: *"example.com/local" | _
	storageClass: allowVolumeExpansion: *false | _
}
targets: dc1: profile: "onprem"
`
	if err := os.WriteFile(filepath.Join(dir, "cue", "zz_onprem.cue"), []byte(onprem), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := eval.Options{Root: dir}

	// It generates, with its defaults (dc1 alone: the example targets are other tests').
	out, err := Build(eval.Options{Root: dir, Only: []string{"dc1"}})
	if err != nil {
		t.Fatal(err)
	}
	var ds string
	for _, f := range out.Files {
		if f.Path == "generated/dc1/daemonset-runsc-installer.yaml" {
			ds = string(f.Data)
		}
	}
	if !strings.Contains(ds, "/opt/gvisor/bin") {
		t.Errorf("dc1's DaemonSet lacks the profile's install dir")
	}

	// The reference lists it.
	ev, err := eval.Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	var ref bytes.Buffer
	if err := docs.Reference(&ref, ev.Schema(), ev.Profiles(), ev.Instance()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"(`kind`, `gke`, `eks`, `aks`, `k3s`, `onprem`, `rke2`)", "| `onprem` | an on-premises cluster | false | `local-ssd` |", "onprem: `\"/opt/gvisor/bin\"`"} {
		if !strings.Contains(ref.String(), want) {
			t.Errorf("the reference lacks %q", want)
		}
	}

	// Messages name it.
	if err := os.MkdirAll(filepath.Join(dir, "targets"), 0o755); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "targets", "bad.yaml")
	if err := os.WriteFile(bad, []byte("profile: nosuch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Build(opts)
	if err == nil || !strings.Contains(err.Error(), `"onprem"`) || !strings.Contains(err.Error(), `"aks"`) {
		t.Errorf("unknown profile: %v", err)
	}
	os.Remove(bad)
	opts.Only = []string{"dc1"}

	// Its managed class is refused by policy, under its name.
	opts.Sets = []string{"storageClass.name=local-ssd"}
	_, err = Build(opts)
	var rej *Rejected
	if !errors.As(err, &rej) || !strings.Contains(err.Error(), `StorageClass "local-ssd" is created and managed by onprem`) {
		t.Errorf("managed class: %v", err)
	}

	// Its pin requirement (false) holds: warnings, no error.
	opts.Sets = nil
	out, err = Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(warn.Lines(out.Vet.Warnings, true), "\n"), "target dc1: gvisor.release.sha512 pins no digest") {
		t.Errorf("no pin warning for dc1: %v", out.Vet.Warnings)
	}
}
