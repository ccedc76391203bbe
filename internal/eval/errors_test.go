package eval

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cuelang.org/go/cue"
)

func TestTranslate(t *testing.T) {
	ev, err := Load(Options{Root: "../.."})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, in, want string }{
		{"gvisor.version", `invalid value "x" (out of bound =~"^20([0-9]{2}(0[13578]|1[02])(0[1-9]|[12][0-9]|3[01])|[0-9]{2}(0[469]|11)(0[1-9]|[12][0-9]|30)|[0-9]{2}02(0[1-9]|1[0-9]|2[0-8])|([02468][048]|[13579][26])0229)(\\.[0-9]+)?$")`, `invalid value "x": want a gVisor release tag`},
		{"gvisor.installer.image.tag", `invalid value "latest" (out of bound !="latest")`, `invalid value "latest": refused by policy: "latest" moves`},
		{"gvisor.release.downloadRetries", `invalid value 11 (out of bound <=10)`, `invalid value 11: want a whole number from 1 to 10 (`},
		{"storageClass.parameters.iops", `conflicting values 3000 and string (mismatched types int and string)`, `invalid value 3000: want a string: quote it ("3000")`},
		{"gvisor.enabled", `conflicting values "yes" and bool (mismatched types string and bool)`, `invalid value "yes": want true or false, written without quotes`},
		{"gvisor.instaler", `field not allowed`, `unknown field "instaler": did you mean "installer"?`},
		{"gvisor.namespace", `field not allowed`, `unknown field "namespace" here: the key is gvisor.installer.namespace`},
		{`gvisor.nodeSelector."a b"`, `field not allowed`, `invalid key "a b": want a label key`},
		{"gvisor.runsc.config.Bad", `field not allowed`, `invalid key "Bad": want `},
		{"zzz", `field not allowed`, `unknown field "zzz": the top level takes `},
		{"gvisor.installer.image.pullPolicy", `incomplete value "Always" | "Never"`, `undecided: "Always" | "Never": want one value`},
		{"a", `conflicting values "a" and "b"`, `conflicting values "a" and "b"`},
	} {
		got, _ := ev.translate(ev.schema, c.path, c.in)
		if !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: %s\n got %s\nwant %s…", c.path, c.in, got, c.want)
		}
	}
}

func TestSetPath(t *testing.T) {
	for in, want := range map[string]string{
		"gvisor.version":                                  "gvisor.version",
		"gvisor.tolerations.0.operator":                   "gvisor.tolerations[0].operator",
		"gvisor.tolerations[2].key":                       "gvisor.tolerations[2].key",
		`gvisor.nodeSelector."cloud.google.com/gke-pool"`: `gvisor.nodeSelector."cloud.google.com/gke-pool"`,
		`a."0"`:  `a."0"`,
		"a..b":   "error",
		"a[x]":   "error",
		`a."b`:   "error",
		`a."b"c`: "error",
		"a[1":    "error",
	} {
		sels, err := setPath(in)
		got := "error"
		if err == nil {
			got = cue.MakePath(sels...).String()
		}
		if got != want {
			t.Errorf("setPath(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestWalkAcceptsEveryValidInput: the unknown-field walk runs beside CUE's
// own closedness check; on every input the repository and the fleet tests
// evaluate without error, it must find nothing (a false "unknown field"
// would block a valid target).
func TestWalkAcceptsEveryValidInput(t *testing.T) {
	fleet := t.TempDir()
	for dst, src := range map[string]string{"cue": "../../cue", "cue-fleet": "../gen/testdata/fleet/cue", "targets": "../gen/testdata/fleet/targets"} {
		if err := os.CopyFS(filepath.Join(fleet, dst), os.DirFS(src)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Rename(filepath.Join(fleet, "cue-fleet", "zz_fleet.cue"), filepath.Join(fleet, "cue", "zz_fleet.cue")); err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{"../..", fleet} {
		ev, err := Load(Options{Root: root})
		if err != nil {
			t.Fatal(err)
		}
		srcs, err := ev.targets()
		if err != nil {
			t.Fatal(err)
		}
		if len(srcs) == 0 {
			t.Fatalf("%s: no targets", root)
		}
		for _, s := range srcs {
			if ds := ev.unknownFields(s.val); len(ds) > 0 {
				t.Errorf("%s: target %s: %s: %s", root, s.name, ds[0].path, ds[0].msg)
			}
		}
	}
	// and on a values file that sets every kind of field
	dir := t.TempDir()
	f := filepath.Join(dir, "all.yaml")
	os.WriteFile(f, []byte(`gvisor:
  nodeSelector: {"cloud.google.com/gke-nodepool": sandbox}
  tolerations: [{key: a, operator: Exists, effect: NoSchedule}]
  runsc: {config: {debug: true}}
  release: {sha512: {x86_64: {runsc: `+strings.Repeat("a", 128)+`}}}
  installer: {namespace: x, image: {repository: busybox, tag: "1.0"}}
storageClass: {parameters: {type: gp3}}
`), 0o644)
	ev, err := Load(Options{Root: "../..", ValuesFiles: []string{f}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := ev.readValues(f)
	if err != nil {
		t.Fatal(err)
	}
	if ds := ev.unknownFields(v); len(ds) > 0 {
		t.Errorf("%s: %s", ds[0].path, ds[0].msg)
	}
}
