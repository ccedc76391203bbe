//go:build nodetest

package node

import (
	"bytes"
	"fmt"
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

// checkReal checks the host's config with the real containerd versions that read its version (1.6 for none, 1 and 2,
// 2.4.2 for all: it migrates 1 and 2): dump exits 0, no "unknown key", runsc present (or absent when !wantRunsc), default kept.
func (h *Host) checkReal(wantRunsc bool) {
	h.t.Helper()
	cfg := h.config()
	var bins []string
	switch fileVersion(cfg) {
	case 1, 2: // 2.x migrates versions 1 and 2 on load
		bins = []string{ctrd16, ctrd24}
	default:
		bins = []string{ctrd24}
	}
	for _, bin := range bins {
		d := h.dump(bin, "/etc/containerd/config.toml")
		if d.Code != 0 {
			h.t.Fatalf("%s config dump failed:\n%s\nconfig:\n%s", bin, d.Stderr, cfg)
		}
		// keys the original config already had ignored (e.g. a 1.6 default on 2.4) are not the installer's doing;
		// every key gvisorgen wrote must be known to this containerd
		if bad := gvisorgenUnknownKeys(cfg, "/etc/containerd/config.toml", d.Stderr); len(bad) > 0 {
			h.t.Fatalf("%s ignores keys gvisorgen wrote: %v\n%s\nconfig:\n%s", bin, bad, d.Stderr, cfg)
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

func assertNotContains(t *testing.T, what, s, sub string) {
	t.Helper()
	if strings.Contains(s, sub) {
		t.Fatalf("%s contains %q:\n%s", what, sub, s)
	}
}

// logfmt parses one logrus text line (key=value, values optionally double-quoted with backslash escapes).
func logfmt(line string) map[string]string {
	m := map[string]string{}
	i := 0
	for i < len(line) {
		for i < len(line) && line[i] == ' ' {
			i++
		}
		j := strings.IndexByte(line[i:], '=')
		if j < 0 {
			break
		}
		k := line[i : i+j]
		i += j + 1
		var v strings.Builder
		if i < len(line) && line[i] == '"' {
			i++
			for i < len(line) && line[i] != '"' {
				if line[i] == '\\' && i+1 < len(line) {
					i++
				}
				v.WriteByte(line[i])
				i++
			}
			i++
		} else {
			for i < len(line) && line[i] != ' ' {
				v.WriteByte(line[i])
				i++
			}
		}
		m[k] = v.String()
	}
	return m
}

// blockKey is one key gvisorgen wrote: where containerd 2.x reports it when it ignores it (plugin + the key's path
// inside the plugin's config, space-separated) and its row in the file.
type blockKey struct {
	Plugin, Path string
	Row          int
}

// headerParts splits a TOML table header's dotted key into its parts (quotes removed).
func headerParts(h string) []string {
	var parts []string
	var cur strings.Builder
	var q byte
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case q != 0 && c == q:
			q = 0
		case q != 0:
			cur.WriteByte(c)
		case c == '"' || c == '\'':
			q = c
		case c == '.':
			parts = append(parts, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	return append(parts, strings.TrimSpace(cur.String()))
}

// blockKeys: every key=value line between gvisorgen's markers. CRI tables of version 1 and 2 files are reported by
// containerd 2.x under the migrated plugin io.containerd.cri.v1.runtime.
func blockKeys(cfg string) []blockKey {
	var out []blockKey
	in := false
	var table []string
	for i, l := range strings.Split(cfg, "\n") {
		switch {
		case l == beginMarker:
			in = true
			continue
		case l == endMarker:
			in = false
		}
		t := strings.TrimSpace(l)
		if !in || t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		if m := headerRE.FindStringSubmatch(t); m != nil {
			table = headerParts(m[1])
			continue
		}
		kv := strings.SplitN(t, "=", 2)
		if len(kv) != 2 || len(table) < 2 || table[0] != "plugins" {
			continue
		}
		plugin, rest := table[1], table[2:]
		if (plugin == "cri" || plugin == "io.containerd.grpc.v1.cri") && len(rest) > 0 && rest[0] == "containerd" {
			plugin = "io.containerd.cri.v1.runtime"
		}
		path := strings.Join(append(append([]string{}, rest...), headerParts(strings.TrimSpace(kv[0]))...), " ")
		out = append(out, blockKey{Plugin: plugin, Path: path, Row: i + 1})
	}
	return out
}

// gvisorgenUnknownKeys: the "Ignoring unknown key" warnings of a dump (parsed as logfmt, never compared as text)
// that name a key gvisorgen wrote: by plugin and key path, or by file and row inside the block.
func gvisorgenUnknownKeys(cfg, cfgPath, stderr string) []string {
	keys := blockKeys(cfg)
	first, last := 0, 0
	for i, l := range strings.Split(cfg, "\n") {
		if l == beginMarker {
			first = i + 1
		}
		if l == endMarker {
			last = i + 1
		}
	}
	var bad []string
	for _, l := range strings.Split(stderr, "\n") {
		f := logfmt(l)
		if !strings.Contains(strings.ToLower(f["msg"]), "unknown key") {
			continue
		}
		for _, k := range keys {
			if f["plugin"] == k.Plugin && f["key"] == k.Path {
				bad = append(bad, f["plugin"]+": "+f["key"])
			}
		}
		if f["file"] == cfgPath && f["row"] != "" && first > 0 {
			var row int
			fmt.Sscanf(f["row"], "%d", &row)
			if row >= first && row <= last {
				bad = append(bad, fmt.Sprintf("%s row %d (in the block): %s", f["file"], row, f["key"]))
			}
		}
	}
	return bad
}
