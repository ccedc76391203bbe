//go:build nodetest

package node

import (
	"bytes"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// Dump is a real containerd's `config dump` of a config file, parsed.
type Dump struct {
	Bin     string
	Code    int
	Stdout  string
	Stderr  string
	Headers map[string]bool
	Prefix  string // effective CRI containerd table
	Default string // default_runtime_name
}

var headerRE = regexp.MustCompile(`^\s*\[+\s*(.*?)\s*\]+\s*$`)

// dump runs `<bin> --config <hostPath> config dump` on the fake host.
func (h *Host) dump(bin, hostPath string) Dump {
	cmd := exec.Command(h.Exec, bin, "--config", hostPath, "config", "dump")
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	d := Dump{Bin: bin, Stdout: so.String(), Headers: map[string]bool{}}
	if err := cmd.Run(); err != nil {
		d.Code = 1
	}
	d.Stdout, d.Stderr = so.String(), se.String()
	version := 0
	cur := ""
	for _, l := range strings.Split(d.Stdout, "\n") {
		if m := headerRE.FindStringSubmatch(l); m != nil {
			cur = strings.ReplaceAll(m[1], "'", `"`)
			d.Headers[cur] = true
			continue
		}
		kv := strings.SplitN(strings.TrimSpace(l), "=", 2)
		if len(kv) != 2 {
			continue
		}
		k, v := strings.TrimSpace(kv[0]), strings.Trim(strings.TrimSpace(kv[1]), `"'`)
		if cur == "" && k == "version" {
			version = int(v[0] - '0')
		}
		if strings.HasSuffix(cur, ".containerd") && k == "default_runtime_name" {
			d.Default = v
		}
	}
	if version >= 3 {
		d.Prefix = `plugins."io.containerd.cri.v1.runtime".containerd`
	} else {
		d.Prefix = `plugins."io.containerd.grpc.v1.cri".containerd`
	}
	return d
}

func (d Dump) HasRuntime(name string) bool { return d.Headers[d.Prefix+".runtimes."+name] }

// fileVersion: the top-level version of a config (1 when absent).
func fileVersion(cfg string) int {
	for _, l := range strings.Split(cfg, "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "[") {
			break
		}
		if strings.HasPrefix(t, "version") {
			kv := strings.SplitN(t, "=", 2)
			if len(kv) == 2 {
				v := strings.TrimSpace(kv[1])
				if v != "" {
					return int(v[0] - '0')
				}
			}
		}
	}
	return 1
}

// checkReal checks the host's config with the real containerd versions that read its version (1.6 for none and 2,
// 2.4.2 for 2, 3 and 4): dump exits 0, no "unknown key", runsc present (or absent when !wantRunsc), default kept.
func (h *Host) checkReal(wantRunsc bool) {
	h.t.Helper()
	cfg := h.config()
	var bins []string
	switch fileVersion(cfg) {
	case 1:
		bins = []string{ctrd16}
	case 2:
		bins = []string{ctrd16, ctrd24}
	default:
		bins = []string{ctrd24}
	}
	for _, bin := range bins {
		d := h.dump(bin, "/etc/containerd/config.toml")
		if d.Code != 0 {
			h.t.Fatalf("%s config dump failed:\n%s\nconfig:\n%s", bin, d.Stderr, cfg)
		}
		// keys the original config already had ignored (e.g. a 1.6 default on 2.4) are not the installer's doing
		for _, l := range strings.Split(d.Stderr, "\n") {
			if strings.Contains(strings.ToLower(l), "unknown key") && strings.Contains(l, "runsc") {
				h.t.Fatalf("%s ignores keys of the runsc runtime:\n%s", bin, d.Stderr)
			}
		}
		if d.HasRuntime("runsc") != wantRunsc {
			h.t.Fatalf("%s: runtimes.runsc under %s present=%v, want %v\nconfig:\n%s", bin, d.Prefix, !wantRunsc, wantRunsc, cfg)
		}
		def := d.Default
		if def == "" {
			def = "runc"
		}
		if !d.HasRuntime(def) {
			h.t.Fatalf("%s: default runtime %q lost under %s\nconfig:\n%s", bin, def, d.Prefix, cfg)
		}
	}
}

func countLines(s, line string) int {
	n := 0
	for _, l := range strings.Split(s, "\n") {
		if l == line {
			n++
		}
	}
	return n
}

const (
	beginMarker = "# >>> gvisorgen: runsc runtime (managed block; edits between these markers are overwritten) >>>"
	endMarker   = "# <<< gvisorgen: runsc runtime <<<"
)

func assertContains(t *testing.T, what, s, sub string) {
	t.Helper()
	if !strings.Contains(s, sub) {
		t.Fatalf("%s does not contain %q:\n%s", what, sub, s)
	}
}
