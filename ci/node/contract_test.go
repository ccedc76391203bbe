//go:build nodetest

package node

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"cuelang.org/go/cue"

	"github.com/gvisorgen/gvisorgen/internal/eval"
)

// TestSchemaAndInstallerAgree feeds one corpus of strings to the values
// schema and to the installer's own validation under busybox, and requires
// the same verdict for each: what vet accepts, every node accepts (no crash
// loop on every node), and what a node would refuse, vet refuses first.
func TestSchemaAndInstallerAgree(t *testing.T) {
	ev, err := eval.Load(eval.Options{Root: repoRoot})
	if err != nil {
		t.Fatal(err)
	}
	long := "/" + strings.Repeat("a", 4096)
	for _, c := range []struct {
		def    string // the schema's definition
		script string // lib.sh's check of "$1"
		corpus []string
	}{
		{"#AbsPath", `gvz_check_path P "$1"`, []string{
			"/usr/local/bin", "/home/kubernetes/bin", "/opt/g_v-1.2/bin", "/run/gvisorgen", "/etc/containerd/config.toml", "/a", "/.hidden/x", "/x..y",
			"", "/", "relative/bin", "./bin", "/opt/g+v", `/opt/a"#`, "/opt/$(reboot)/bin", "/opt/a`id`", "/opt/ü", "/run/a$b",
			"/opt/a b", "/opt/a\tb", "/opt/a\nb", "/opt//bin", "/opt/bin/", "/opt/./bin", "/opt/../etc", "/opt/..", "/opt/.",
			"/..", "/.", "/opt/a;b", "/opt/a'b", `/opt/a\b`, "/opt/a=b", "/opt/[x]", "/opt/*", "/opt/~", "/opt/a:b", long,
		}},
		{"#ReleaseTag", `GVISOR_VERSION=$1; gvz_check_version`, []string{
			"20240212", "20240229", "20000229", "20991231", "20240212.1", "20240212.10", "20260801",
			"", "latest", "00000000", "20241399", "20230229", "21000229", "19991231", "20240230", "20240431", "2024021",
			"202402120", "20240212.", "20240212.x", "20240212.1.2", "20240212-1", " 20240212", "20240212 ", "２０２４０２１２",
			"20240212\n", "2024-02-12", "+20240212", "20240212.-1", "30000101",
		}},
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
