//go:build nodetest

package node

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"github.com/rogpeppe/go-internal/txtar"

	"github.com/gvisorgen/gvisorgen/internal/eval"
	"github.com/gvisorgen/gvisorgen/internal/gen"
)

// TestSchemaAndInstallerAgree feeds one corpus of strings to the values
// schema and to the installer's own validation under busybox, and requires
// the same verdict for each: what vet accepts, every node accepts (no crash
// loop on every node), and what a node would refuse, vet refuses first.
func TestSchemaAndInstallerAgree(t *testing.T) {
	t.Parallel()
	ev, err := eval.Load(eval.Options{Root: repoRoot})
	if err != nil {
		t.Fatal(err)
	}
	// The strings are the shared corpus's (internal/schema/testdata): the
	// values' JSON Schema is held to CUE's verdict on the same ones.
	ar, err := txtar.ParseFile(filepath.Join(repoRoot, "internal/schema/testdata/corpus.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	strs := func(def string) []string {
		for _, f := range ar.Files {
			if f.Name != "strings/"+def {
				continue
			}
			var out []string
			for _, l := range strings.Split(strings.TrimSpace(string(f.Data)), "\n") {
				var s string
				if err := json.Unmarshal([]byte(l), &s); err != nil {
					t.Fatalf("corpus %s: %q: %v", f.Name, l, err)
				}
				out = append(out, s)
			}
			return out
		}
		t.Fatalf("the corpus has no strings/%s", def)
		return nil
	}
	for _, c := range []struct {
		def    string // the schema's definition
		script string // lib.sh's check of "$1"
		corpus []string
	}{
		{"#AbsPath", `gvz_check_path P "$1"`, strs("AbsPath")},
		{"#ReleaseTag", `GVISOR_VERSION=$1; gvz_check_version`, strs("ReleaseTag")},
		// a class's handler as RUNSC_CLASSES names it: the line [handler]
		{"#ClassHandler", `. "$GVISORGEN_SCRIPTS/classes.sh"; RUNSC_CLASSES="[$1]"; case $1 in *"
"*) exit 1 ;; esac; gvz_check_classes; [ "$GVZ_CLASSES" = "$1" ]`, strs("ClassHandler")},
	} {
		def := ev.Instance().LookupPath(cue.ParsePath(c.def))
		if !def.Exists() {
			t.Fatalf("%s: not in the module", c.def)
		}
		for _, s := range c.corpus {
			schemaOK := def.Unify(ev.Context().Encode(s)).Validate(cue.Concrete(true)) == nil
			cmd := exec.Command(busybox, "sh", "-c", `set -eu; . "$GVISORGEN_SCRIPTS/lib.sh"; `+c.script, "sh", s)
			cmd.Env = []string{"PATH=" + bbDir, "GVISORGEN_SCRIPTS=" + scriptsDir}
			out, err := cmd.CombinedOutput()
			nodeOK := err == nil
			if schemaOK != nodeOK {
				t.Errorf("%s %q: schema says %v, the installer says %v (%s)", c.def, clip(s), verdict(schemaOK), verdict(nodeOK), strings.TrimSpace(string(out)))
			}
		}
	}
}

func verdict(ok bool) string {
	if ok {
		return "valid"
	}
	return "invalid"
}

func clip(s string) string {
	if len(s) > 40 {
		return fmt.Sprintf("%s…(%d bytes)", s[:40], len(s))
	}
	return s
}

// TestSchemaNumbersAndRunscLinesPassTheInstaller: for the numbers and the
// runsc flags, the schema is the stricter side (ranges, flag names), so the
// direction that keeps nodes up is checked: every value vet accepts renders
// into an environment the installer accepts, and every value the installer
// refuses, vet refuses first.
func TestSchemaNumbersAndRunscLinesPassTheInstaller(t *testing.T) {
	t.Parallel()
	libCheck := func(env map[string]string, script string) (bool, string) {
		cmd := exec.Command(busybox, "sh", "-c", `set -eu; . "$GVISORGEN_SCRIPTS/lib.sh"; `+script)
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		// Last wins: the scripts from this checkout, host commands stubbed.
		cmd.Env = append(cmd.Env, "PATH="+bbDir, "GVISORGEN_SCRIPTS="+scriptsDir, "HOST_EXEC=true")
		out, err := cmd.CombinedOutput()
		return err == nil, strings.TrimSpace(string(out))
	}
	// rendered evaluates the kind target with one --set and returns the
	// installer container's environment, or false when vet refuses it.
	rendered := func(set string) (map[string]string, bool) {
		res, err := renderKind(set)
		if err != nil {
			return nil, false
		}
		return res, true
	}
	for _, c := range []struct{ field, env string }{
		{"gvisor.release.downloadTimeoutSeconds", "DOWNLOAD_TIMEOUT_SECONDS"},
		{"gvisor.release.downloadRetries", "DOWNLOAD_RETRIES"},
		{"gvisor.installer.restartTimeoutSeconds", "RESTART_TIMEOUT_SECONDS"},
	} {
		for _, n := range []string{"-1", "0", "1", "4", "5", "10", "11", "60", "600", "601", "3600", "3601", "99999999999", "1.5", `"7"`} {
			env, schemaOK := rendered(c.field + "=" + n)
			nodeOK, _ := libCheck(map[string]string{c.env: strings.Trim(n, `"`)}, "gvz_load_env")
			if schemaOK {
				if ok, out := libCheck(env, "gvz_load_env"); !ok {
					t.Errorf("%s=%s: vet accepts it, the installer refuses %s=%q: %s", c.field, n, c.env, env[c.env], out)
				}
			}
			if !nodeOK && schemaOK {
				t.Errorf("%s=%s: the installer refuses it, vet accepts it", c.field, n)
			}
		}
	}
	for _, kv := range []string{
		`platform=systrap`, `network=none`, `num-network-channels=4`, `debug=true`,
		`debug-log="/tmp/runsc/[x]"`, `platform="a\nb"`, `platform="[runsc_config]"`, `platform="\n[evil]\nx = 1"`,
		`"[evil]"=x`, `Platform=x`, `-x=1`, `a_b=1`, `"a b"=1`, `platform="ü\"'#$(reboot)"`,
	} {
		env, schemaOK := rendered("gvisor.runsc.config." + kv)
		if !schemaOK {
			continue
		}
		if ok, out := libCheck(map[string]string{"RUNSC_CONFIG_TOML": env["RUNSC_CONFIG_TOML"]}, "gvz_check_runsc_toml"); !ok {
			t.Errorf("runsc.config %s: vet accepts it, the installer refuses the line %q: %s", kv, env["RUNSC_CONFIG_TOML"], out)
		}
	}
}

// renderKind renders the kind target with one --set, as generate would, and
// returns the install-runsc container's environment.
func renderKind(set string) (map[string]string, error) {
	out, err := gen.Build(eval.Options{Root: repoRoot, Sets: []string{set}, Only: []string{"kind"}})
	if err != nil {
		return nil, err
	}
	for _, o := range out.Result.Targets[0].Objects {
		if o.Kind != "DaemonSet" {
			continue
		}
		var ds struct {
			Spec struct {
				Template struct {
					Spec struct {
						InitContainers []struct {
							Name string
							Env  []struct{ Name, Value string }
						} `json:"initContainers"`
					}
				}
			}
		}
		if err := json.Unmarshal(o.JSON, &ds); err != nil {
			return nil, err
		}
		env := map[string]string{}
		for _, e := range ds.Spec.Template.Spec.InitContainers[0].Env {
			env[e.Name] = e.Value
		}
		return env, nil
	}
	return nil, fmt.Errorf("no DaemonSet")
}
