// Command scan runs the independent linters (kube-score, and trivy config when
// built) over the generated tree and holds their findings to one list of
// accepted findings, each with its reason (ci/scan/accepted.tsv, which the
// docs/security.md shows). It prints every finding with its reason
// and fails on a finding the list does not justify, and on an entry no
// finding uses any more (a fixed finding leaves the list).
//
//	go run ./ci/scan -kube-score BIN [-trivy BIN]
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/gvisorgen/gvisorgen/internal/layout"
)

// Finding is one tool's complaint about one object, by check.
type Finding struct {
	Tool, Check, Object, Detail string
}

func (f Finding) key() string { return f.Tool + "\t" + f.Check + "\t" + f.Object }

// Accepted is one row of accepted.tsv: tool, check, object ("Kind/name", or
// "Kind/*" for every object of the kind) and the reason.
type Accepted struct{ Tool, Check, Object, Reason string }

func (a Accepted) matches(f Finding) bool {
	if a.Tool != f.Tool || a.Check != f.Check {
		return false
	}
	kind, name, _ := strings.Cut(a.Object, "/")
	fk, fn, _ := strings.Cut(f.Object, "/")
	return kind == fk && (name == "*" || name == fn)
}

// ReadAccepted reads accepted.tsv (# comments and blank lines skipped).
func ReadAccepted(path string) ([]Accepted, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []Accepted
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			continue
		}
		p := strings.Split(l, "\t")
		if len(p) != 4 || p[3] == "" {
			return nil, fmt.Errorf("%s:%d: want tool, check, object and reason separated by tabs", path, n)
		}
		out = append(out, Accepted{p[0], p[1], p[2], p[3]})
	}
	return out, sc.Err()
}

func main() {
	ks := flag.String("kube-score", "", "kube-score binary")
	tv := flag.String("trivy", "", "trivy binary (empty: trivy is skipped, and said so)")
	list := flag.String("accepted", "ci/scan/accepted.tsv", "the accepted findings")
	flag.Parse()
	acc, err := ReadAccepted(*list)
	if err != nil {
		fail(err)
	}
	files, err := filepath.Glob(filepath.Join(layout.GeneratedDir, "*", "*.yaml"))
	if err != nil || len(files) == 0 {
		fail(fmt.Errorf("no %s/*/*.yaml: run from the repository root after make generate", layout.GeneratedDir))
	}
	smoke, _ := filepath.Glob(filepath.Join(layout.SmokeDir, "*", "*.yaml"))
	files = append(files, smoke...)
	var found []Finding
	if *ks != "" {
		f, err := kubeScore(*ks, files)
		if err != nil {
			fail(err)
		}
		found = append(found, f...)
	}
	tools := map[string]bool{"kube-score": *ks != ""}
	if *tv != "" {
		f, err := trivy(*tv, []string{layout.GeneratedDir, layout.SmokeDir})
		if err != nil {
			fail(err)
		}
		found = append(found, f...)
		tools["trivy"] = true
	} else {
		fmt.Println("scan: trivy skipped (no -trivy binary): its accepted findings are not checked")
	}
	os.Exit(report(found, acc, tools))
}

// report prints each distinct finding with its reason and returns the exit code.
func report(found []Finding, acc []Accepted, tools map[string]bool) int {
	seen := map[string]Finding{}
	for _, f := range found {
		if old, ok := seen[f.key()]; ok && !strings.Contains(old.Detail, f.Detail) {
			f.Detail = old.Detail + "; " + f.Detail
		}
		seen[f.key()] = f
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	used := make([]bool, len(acc))
	bad := 0
	for _, k := range keys {
		f := seen[k]
		reason := ""
		for i, a := range acc {
			if a.matches(f) {
				used[i], reason = true, a.Reason
				break
			}
		}
		if reason == "" {
			bad++
			fmt.Printf("NEW        %s %s %s: %s\n", f.Tool, f.Check, f.Object, f.Detail)
			continue
		}
		fmt.Printf("justified  %s %s %s: %s\n           why: %s\n", f.Tool, f.Check, f.Object, f.Detail, reason)
	}
	for i, a := range acc {
		if !used[i] && tools[a.Tool] {
			bad++
			fmt.Printf("STALE      %s %s %s: no such finding any more; remove it from ci/scan/accepted.tsv and docs/security.md\n", a.Tool, a.Check, a.Object)
		}
	}
	fmt.Printf("scan: %d findings, %d not justified or stale\n", len(keys), bad)
	if bad > 0 {
		return 1
	}
	return 0
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "scan:", err)
	os.Exit(2)
}

// kubeScore runs kube-score over the files; every check below grade 10 that
// ran is a finding.
func kubeScore(bin string, files []string) ([]Finding, error) {
	args := append([]string{"score", "--output-format", "json"}, files...)
	out, err := exec.Command(bin, args...).Output()
	// kube-score exits 1 when it has critical findings: the JSON is the answer.
	if len(out) == 0 {
		return nil, fmt.Errorf("kube-score: %v", err)
	}
	var objs []struct {
		ObjectName string `json:"object_name"`
		TypeMeta   struct {
			Kind string `json:"kind"`
		} `json:"type_meta"`
		ObjectMeta struct {
			Name string `json:"name"`
		} `json:"object_meta"`
		Checks []struct {
			Check struct {
				ID string `json:"id"`
			} `json:"check"`
			Grade    int  `json:"grade"`
			Skipped  bool `json:"skipped"`
			Comments []struct {
				Path    string `json:"path"`
				Summary string `json:"summary"`
			} `json:"comments"`
		} `json:"checks"`
	}
	if err := json.Unmarshal(out, &objs); err != nil {
		return nil, fmt.Errorf("kube-score output: %w", err)
	}
	var fs []Finding
	for _, o := range objs {
		for _, c := range o.Checks {
			if c.Skipped || c.Grade >= 10 {
				continue
			}
			var d []string
			for _, cm := range c.Comments {
				s := cm.Summary
				if cm.Path != "" {
					s = "(" + cm.Path + ") " + s
				}
				d = append(d, s)
			}
			fs = append(fs, Finding{"kube-score", c.Check.ID, o.TypeMeta.Kind + "/" + o.ObjectMeta.Name, strings.Join(d, "; ")})
		}
	}
	return fs, nil
}

// trivy runs trivy config with its built-in checks (no download) over dirs.
func trivy(bin string, dirs []string) ([]Finding, error) {
	var fs []Finding
	for _, d := range dirs {
		cmd := exec.Command(bin, "config", "--quiet", "--skip-check-update", "--format", "json", d)
		cmd.Env = append(os.Environ(), "TRIVY_CACHE_DIR="+filepath.Join(os.TempDir(), "gvisorgen-trivy-cache"))
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("trivy config %s: %v", d, err)
		}
		var r struct {
			Results []struct {
				Target            string `json:"Target"`
				Misconfigurations []struct {
					ID      string `json:"ID"`
					Message string `json:"Message"`
					Status  string `json:"Status"`
					Cause   struct {
						Resource string `json:"Resource"`
					} `json:"CauseMetadata"`
				} `json:"Misconfigurations"`
			} `json:"Results"`
		}
		if err := json.Unmarshal(out, &r); err != nil {
			return nil, fmt.Errorf("trivy output: %w", err)
		}
		for _, res := range r.Results {
			for _, m := range res.Misconfigurations {
				if m.Status != "" && m.Status != "FAIL" {
					continue
				}
				fs = append(fs, Finding{"trivy", m.ID, objectOfFile(filepath.Join(d, res.Target)), m.Message})
			}
		}
	}
	return fs, nil
}

// objectOfFile names the object of a generated file (one object a file) as
// Kind/name, read from the file itself.
func objectOfFile(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return p
	}
	var o struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if yaml.Unmarshal(b, &o) != nil || o.Kind == "" {
		return p
	}
	return o.Kind + "/" + o.Metadata.Name
}
