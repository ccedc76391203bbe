package gen

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"sigs.k8s.io/yaml"

	"github.com/gvisorgen/gvisorgen/internal/eval"
)

// contractVar is one variable of #InstallerEnv.
type contractVar struct {
	Name     string
	Default  string `json:"default"`
	Required bool   `json:"required"`
	Rendered bool   `json:"rendered"`
	// OmitEmpty: left out of a DaemonSet that sets it to "".
	OmitEmpty bool `json:"omitEmpty"`
}

func installerContract(t *testing.T) []contractVar {
	t.Helper()
	ev, err := eval.Load(eval.Options{Root: repoRoot})
	if err != nil {
		t.Fatal(err)
	}
	it, err := ev.Instance().LookupPath(cue.ParsePath("#InstallerEnv")).Fields()
	if err != nil {
		t.Fatal(err)
	}
	var out []contractVar
	for it.Next() {
		var v contractVar
		if err := it.Value().Decode(&v); err != nil {
			t.Fatal(err)
		}
		v.Name = it.Selector().Unquoted()
		out = append(out, v)
	}
	if len(out) < 10 {
		t.Fatalf("#InstallerEnv has %d variables", len(out))
	}
	return out
}

func readRepo(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, p))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestInstallerEnvContract: #InstallerEnv (cue/installer.cue) is the
// installer contract's one home; every other copy agrees with it: the env of
// every rendered installer container, lib.sh's defaults, the README table,
// the variables the node tests set, and the bench chart's env.
func TestInstallerEnvContract(t *testing.T) {
	contract := installerContract(t)
	byName := map[string]contractVar{}
	// rendered: what every DaemonSet sets; always: the same without the
	// variables left out while empty (what a target without them gets).
	var all, rendered, always []string
	for _, v := range contract {
		byName[v.Name] = v
		all = append(all, v.Name)
		if v.Rendered {
			rendered = append(rendered, v.Name)
			if !v.OmitEmpty {
				always = append(always, v.Name)
			}
		}
	}
	sorted := func(s []string) []string { s = slices.Clone(s); sort.Strings(s); return slices.Compact(s) }

	// The rendered DaemonSets: every container that runs the installer's
	// scripts, init or not, gets exactly the rendered variables, in the
	// contract's order; the readiness gate's kubectl container only its node's
	// name.
	dss, _ := filepath.Glob(filepath.Join(repoRoot, "generated", "*", "daemonset-runsc-installer.yaml"))
	if len(dss) == 0 {
		t.Fatal("no rendered DaemonSet")
	}
	for _, file := range dss {
		target := filepath.Base(filepath.Dir(file))
		var ds struct {
			Spec struct {
				Template struct {
					Spec struct {
						InitContainers, Containers []struct {
							Name string
							Env  []struct{ Name string }
						}
					}
				}
			}
		}
		if err := yaml.Unmarshal([]byte(readRepo(t, "generated/"+target+"/daemonset-runsc-installer.yaml")), &ds); err != nil {
			t.Fatal(err)
		}
		s := ds.Spec.Template.Spec
		for _, c := range append(s.InitContainers, s.Containers...) {
			var names []string
			for _, e := range c.Env {
				names = append(names, e.Name)
			}
			want := []string{}
			for _, n := range rendered {
				if !byName[n].OmitEmpty || slices.Contains(names, n) {
					want = append(want, n)
				}
			}
			if gateContainers[c.Name] {
				want = []string{"NODE_NAME"}
			}
			if !slices.Equal(names, want) {
				t.Errorf("%s: container %s env = %v, want %v", target, c.Name, names, want)
			}
		}
	}

	// lib.sh: gvz_load_env applies each default, and reads nothing else.
	lib := readRepo(t, "cue/installer/lib.sh")
	defRE := regexp.MustCompile(`(?m)^\s+([A-Z][A-Z0-9_]+)=\$\{([A-Z][A-Z0-9_]+):?-([^}]*)\}$`)
	seen := map[string]string{}
	for _, m := range defRE.FindAllStringSubmatch(lib, -1) {
		if m[1] == m[2] {
			seen[m[1]] = m[3]
		}
	}
	delete(seen, "GVZ_NAME") // lib.sh's own log prefix, not an input
	for _, v := range contract {
		got, ok := seen[v.Name]
		switch {
		case v.Name == "GVISORGEN_SCRIPTS":
			// Read by every script before lib.sh is found: its default sits
			// in their source line.
			if !strings.Contains(readRepo(t, "cue/installer/install-runsc.sh"), `"${GVISORGEN_SCRIPTS:-`+v.Default+`}/lib.sh"`) {
				t.Errorf("install-runsc.sh does not default GVISORGEN_SCRIPTS to %s", v.Default)
			}
		case !ok:
			t.Errorf("lib.sh does not default %s", v.Name)
		case got != v.Default:
			t.Errorf("lib.sh defaults %s to %q, the contract to %q", v.Name, got, v.Default)
		}
	}
	for n := range seen {
		if _, ok := byName[n]; !ok {
			t.Errorf("lib.sh reads %s, which the contract does not list", n)
		}
	}

	// The README table: one row per variable, with the contract's default.
	readme := readRepo(t, "cue/installer/README.md")
	rowRE := regexp.MustCompile("(?m)^\\| `([A-Z][A-Z0-9_]+)` \\| ([^|]*) \\|")
	var rows []string
	for _, m := range rowRE.FindAllStringSubmatch(readme, -1) {
		rows = append(rows, m[1])
		v, ok := byName[m[1]]
		if !ok {
			t.Errorf("README table lists %s, which the contract does not", m[1])
			continue
		}
		cell := strings.TrimSpace(m[2])
		want := "`" + v.Default + "`"
		switch {
		case v.Required:
			want = "(required"
		case v.Default == "":
			want = "empty"
		}
		if !strings.HasPrefix(cell, want) {
			t.Errorf("README table: %s default %q, want %s", m[1], cell, want)
		}
	}
	if !slices.Equal(sorted(rows), sorted(all)) {
		t.Errorf("README table rows %v, contract %v", sorted(rows), sorted(all))
	}

	// The node tests set only contract variables.
	files, _ := filepath.Glob(filepath.Join(repoRoot, "ci/node/*_test.go"))
	varRE := regexp.MustCompile(`"((?:GVISOR|HOST|INSTALL|CONTAINERD|RUNSC|STATE|DOWNLOAD|RESTART|LOCK|ADOPT)_[A-Z0-9_]+)"`)
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, m := range varRE.FindAllStringSubmatch(string(b), -1) {
			if _, ok := byName[m[1]]; !ok {
				t.Errorf("%s sets %s, which the contract does not list", filepath.Base(f), m[1])
			}
		}
	}

	// The bench chart renders the same variables, in order.
	chart := readRepo(t, "ci/bench/chart/templates/_helpers.tpl")
	var chartEnv []string
	for _, m := range regexp.MustCompile(`(?m)^- \{name: ([A-Z][A-Z0-9_]+), value:`).FindAllStringSubmatch(chart, -1) {
		chartEnv = append(chartEnv, m[1])
	}
	if !slices.Equal(chartEnv, always) {
		t.Errorf("bench chart env = %v, want %v", chartEnv, always)
	}
}

// TestArchAffinityInEveryDaemonSet: every rendered installer DaemonSet selects
// the architectures gVisor serves (kubernetes.io/arch In …), so it never lands
// on a node it cannot serve.
func TestArchAffinityInEveryDaemonSet(t *testing.T) {
	dss, _ := filepath.Glob(filepath.Join(repoRoot, "generated", "*", "daemonset-runsc-installer.yaml"))
	if len(dss) == 0 {
		t.Fatal("no rendered DaemonSet")
	}
	for _, file := range dss {
		var ds struct {
			Spec struct {
				Template struct {
					Spec struct {
						Affinity struct {
							NodeAffinity struct {
								Required struct {
									Terms []struct {
										Exprs []struct {
											Key      string
											Operator string
											Values   []string
										} `json:"matchExpressions"`
									} `json:"nodeSelectorTerms"`
								} `json:"requiredDuringSchedulingIgnoredDuringExecution"`
							} `json:"nodeAffinity"`
						}
					}
				}
			}
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, &ds); err != nil {
			t.Fatal(err)
		}
		terms := ds.Spec.Template.Spec.Affinity.NodeAffinity.Required.Terms
		ok := len(terms) > 0
		for _, term := range terms {
			found := false
			for _, e := range term.Exprs {
				if e.Key == "kubernetes.io/arch" && e.Operator == "In" && len(e.Values) > 0 &&
					!slices.ContainsFunc(e.Values, func(v string) bool { return v != "amd64" && v != "arm64" }) {
					found = true
				}
			}
			ok = ok && found
		}
		if !ok {
			t.Errorf("%s: no kubernetes.io/arch In [amd64|arm64] node affinity in every term", file)
		}
	}
}

// gateContainers are the readiness gate's kubectl containers: label-node, the
// last init container in install mode, and unlabel-node, the first in
// uninstall mode.
var gateContainers = map[string]bool{"label-node": true, "unlabel-node": true}

// TestInstallerContainersLeastMounts: in every rendered installer DaemonSet each
// container has a read-only root filesystem, an ephemeral-storage request and
// /tmp on the pod's size-bounded emptyDir, and each init container mounts only
// the host folders its script uses (install-runsc: the install dir and the
// state dir; configure-containerd: the containerd dir and the state dir);
// runsc-ready reads all three. The readiness gate's label-node, last, mounts
// only its projected token (read-only, at kubectl's in-cluster path), no host
// folder and no /tmp, and runs unprivileged like runsc-ready; the pod mounts
// no token by itself.
func TestInstallerContainersLeastMounts(t *testing.T) {
	dss, _ := filepath.Glob(filepath.Join(repoRoot, "generated", "*", "daemonset-runsc-installer.yaml"))
	if len(dss) == 0 {
		t.Fatal("no rendered DaemonSet")
	}
	type container struct {
		Name      string
		Resources struct {
			Requests map[string]string
		}
		SecurityContext struct {
			ReadOnlyRootFilesystem   bool  `json:"readOnlyRootFilesystem"`
			Privileged               *bool `json:"privileged"`
			AllowPrivilegeEscalation *bool `json:"allowPrivilegeEscalation"`
			RunAsNonRoot             *bool `json:"runAsNonRoot"`
			RunAsUser                *int  `json:"runAsUser"`
			Capabilities             struct {
				Drop []string
				Add  []string
			}
		} `json:"securityContext"`
		VolumeMounts []struct {
			Name      string
			MountPath string `json:"mountPath"`
			ReadOnly  bool   `json:"readOnly"`
		} `json:"volumeMounts"`
	}
	want := map[string][]string{
		"install-runsc":        {"scripts", "tmp", "host-install-dir", "host-state"},
		"configure-containerd": {"scripts", "tmp", "host-containerd", "host-state"},
		"runsc-ready":          {"scripts", "tmp", "host-install-dir", "host-containerd", "host-state"},
		"label-node":           {"api-token"},
	}
	for _, file := range dss {
		var ds struct {
			Spec struct {
				Template struct {
					Spec struct {
						AutomountServiceAccountToken *bool       `json:"automountServiceAccountToken"`
						InitContainers               []container `json:"initContainers"`
						Containers                   []container
						Volumes                      []struct {
							Name     string
							EmptyDir *struct {
								SizeLimit string `json:"sizeLimit"`
							} `json:"emptyDir"`
							Projected *struct {
								Sources []struct {
									ServiceAccountToken *struct {
										ExpirationSeconds int `json:"expirationSeconds"`
									} `json:"serviceAccountToken"`
								}
							}
						}
					}
				}
			}
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, &ds); err != nil {
			t.Fatal(err)
		}
		s := ds.Spec.Template.Spec
		tmpOK := false
		for _, v := range s.Volumes {
			if v.Name == "tmp" && v.EmptyDir != nil && v.EmptyDir.SizeLimit != "" {
				tmpOK = true
			}
		}
		if !tmpOK {
			t.Errorf("%s: no emptyDir volume tmp with a sizeLimit", file)
		}
		if s.AutomountServiceAccountToken == nil || *s.AutomountServiceAccountToken {
			t.Errorf("%s: the pod mounts a service account token by itself (automountServiceAccountToken not false)", file)
		}
		for _, v := range s.Volumes {
			if v.Projected == nil {
				continue
			}
			for _, src := range v.Projected.Sources {
				if tok := src.ServiceAccountToken; tok != nil && (v.Name != "api-token" || tok.ExpirationSeconds < 600 || tok.ExpirationSeconds > 3600) {
					t.Errorf("%s: volume %s: a token that is not the gate's short-lived one (%d s)", file, v.Name, tok.ExpirationSeconds)
				}
			}
		}
		all := append(append([]container{}, s.InitContainers...), s.Containers...)
		if len(all) != 4 || s.InitContainers[len(s.InitContainers)-1].Name != "label-node" {
			t.Errorf("%s: want 4 containers (install mode, the gate on), label-node the last init container; got %d", file, len(all))
		}
		for _, c := range all {
			if !c.SecurityContext.ReadOnlyRootFilesystem {
				t.Errorf("%s: %s: root filesystem not read-only", file, c.Name)
			}
			if c.Resources.Requests["ephemeral-storage"] == "" {
				t.Errorf("%s: %s: no ephemeral-storage request", file, c.Name)
			}
			var got []string
			for _, m := range c.VolumeMounts {
				got = append(got, m.Name)
				if m.Name == "tmp" && m.MountPath != "/tmp" {
					t.Errorf("%s: %s: tmp mounted at %s", file, c.Name, m.MountPath)
				}
			}
			if !slices.Equal(got, want[c.Name]) {
				t.Errorf("%s: %s mounts %v, want %v", file, c.Name, got, want[c.Name])
			}
			if c.Name == "runsc-ready" || gateContainers[c.Name] {
				// the long-running container: unprivileged, not root, no capabilities, host folders read-only
				sc := c.SecurityContext
				if sc.Privileged == nil || *sc.Privileged || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
					sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 ||
					!slices.Equal(sc.Capabilities.Drop, []string{"ALL"}) || len(sc.Capabilities.Add) > 0 {
					t.Errorf("%s: %s is not unprivileged: %+v", file, c.Name, sc)
				}
				for _, m := range c.VolumeMounts {
					if (strings.HasPrefix(m.Name, "host-") || m.Name == "api-token") && !m.ReadOnly {
						t.Errorf("%s: %s mounts %s read-write", file, c.Name, m.Name)
					}
					if m.Name == "api-token" && m.MountPath != "/var/run/secrets/kubernetes.io/serviceaccount" {
						t.Errorf("%s: %s mounts its token at %s, not kubectl's in-cluster path", file, c.Name, m.MountPath)
					}
				}
			}
		}
	}
}
