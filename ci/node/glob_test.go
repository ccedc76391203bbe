//go:build nodetest

package node

import (
	"fmt"
	"math/rand"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGlobAgreesWithGo: lib.sh's glob (GVZ_AWK_GLOB, behind glob_import and every awk program that matches an
// imports pattern) says what Go's filepath.Match, which containerd's imports Glob uses, says for the same pattern and
// path. A disagreement is a refusal missed (a pattern that loads gvisorgen's bookkeeping files), a drop-in written where
// containerd never loads it, or a self-import not seen. One awk judges every pair.
func TestGlobAgreesWithGo(t *testing.T) {
	t.Parallel()
	patterns := []string{
		"/etc/containerd/*.toml", "/etc/containerd/conf.d/*", "/etc/containerd/*", "*.toml", "/etc/*/config.toml",
		"/etc/containerd/config.toml.*", "/etc/containerd/config.toml?gvisorgen-applied", "/etc/containerd/?",
		"/etc/containerd/[a-c]*.toml", "/etc/containerd/[!a-c]*.toml", "/etc/containerd/[^a-c]*.toml",
		"/etc/containerd/[cx]onfig.toml", "/etc/containerd/conf.[d]/*.toml", "/etc/containerd/\\*.toml",
		"/etc/containerd/conf\\.d/*.toml", "/etc/containerd/.*", "/etc/containerd/*.gvisorgen-*",
		"/etc/containerd/config.toml", "/etc/containerd/conf.d/gvisorgen-runsc.tom?", "/etc/containerd/**/*.toml",
		"/etc/containerd/a+b(c)/{x}|$^.toml", "/etc/containerd/[.]*", "/etc/containerd/*[0-9]",
		"/etc/containerd/\\^x", "/etc/containerd/\\\\x", "/etc/containerd/\\]x", "/etc/containerd/\\/x", "/etc/containerd/[^^]*",
	}
	paths := []string{
		"/etc/containerd/config.toml", "/etc/containerd/config.toml.gvisorgen-applied",
		"/etc/containerd/config.toml.gvisorgen-backup", "/etc/containerd/.config.toml.gvisorgen-tmp.1",
		"/etc/containerd/conf.d/gvisorgen-runsc.toml", "/etc/containerd/conf.d/.gvisorgen-runsc.toml.gvisorgen-tmp.1",
		"/etc/containerd/runsc.toml", "/etc/containerd/a", "/etc/containerd/conf.d", "/etc/containerd/x.toml",
		"/etc/containerd/*.toml", "/etc/containerd/confxd/a.toml", "/etc/containerd/a+b(c)/{x}|$^.toml",
		"/etc/containerd/gpu.toml", "/etc/containerd/v2", "/etc/containerd/sub/dir/a.toml",
		"/etc/containerd/^x", "/etc/containerd/\\x", "/etc/containerd/]x", "/etc/containerd//x", "/etc/containerd/^",
	}
	var in strings.Builder
	type pair struct{ p, s string }
	var pairs []pair
	for _, p := range patterns {
		for _, s := range paths {
			pairs = append(pairs, pair{p, s})
			fmt.Fprintf(&in, "%s\n%s\n", p, s)
		}
	}
	// one awk (GVZ_AWK_GLOB itself) judges every pair: patterns reach it from its input, never awk -v
	const judge = `set -eu; . "$GVISORGEN_SCRIPTS/lib.sh"
awk "$GVZ_AWK_GLOB"' NR % 2 == 1 { p = $0; next } { print (glob(p, $0) ? "y" : "n") }'`
	cmd := exec.Command(busybox, "sh", "-c", judge)
	cmd.Env = []string{"PATH=" + bbDir, "GVISORGEN_SCRIPTS=" + scriptsDir}
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	got := strings.Fields(string(out))
	if len(got) != len(pairs) {
		t.Fatalf("%d verdicts for %d pairs: %s", len(got), len(pairs), out)
	}
	matched := 0
	for i, pr := range pairs {
		want, err := filepath.Match(pr.p, pr.s)
		if err != nil {
			t.Fatalf("%q: %v (the corpus holds valid patterns only)", pr.p, err)
		}
		if want {
			matched++
		}
		if (got[i] == "y") != want {
			t.Errorf("glob(%q, %q) = %v, Go's filepath.Match says %v", pr.p, pr.s, got[i] == "y", want)
		}
	}
	if matched < 20 {
		t.Errorf("only %d of %d pairs match: the corpus no longer exercises matches", matched, len(pairs))
	}

	// Generated pairs over the characters the syntax is made of, in one awk (GVZ_AWK_GLOB itself): malformed patterns
	// included, where Go returns an error (containerd then refuses the config) and glob must say no match.
	rng := rand.New(rand.NewSource(26))
	const alphabet = `ab/.*?[]^!-\\`
	gen := func(n int) string {
		b := make([]byte, rng.Intn(n)+1)
		for i := range b {
			b[i] = alphabet[rng.Intn(len(alphabet))]
		}
		return string(b)
	}
	in.Reset()
	pairs = pairs[:0]
	// half the patterns are made from their path, each char kept, escaped, or replaced by ?, *, a class or a range
	// that holds it: they mostly match
	from := func(path string) string {
		var b strings.Builder
		for i := 0; i < len(path); i++ {
			c := path[i]
			switch rng.Intn(7) {
			case 0:
				b.WriteByte('?')
			case 1:
				b.WriteByte('*')
			case 2:
				fmt.Fprintf(&b, "[\\%c]", c)
			case 3:
				fmt.Fprintf(&b, "[^%c]", alphabet[rng.Intn(len(alphabet))])
			case 4:
				fmt.Fprintf(&b, "\\%c", c)
			default:
				b.WriteByte(c)
			}
		}
		return b.String()
	}
	for i := 0; i < 4000; i++ {
		pr := pair{gen(8), gen(6)}
		if i%2 == 1 {
			pr.p = from(pr.s)
		}
		pairs = append(pairs, pr)
		fmt.Fprintf(&in, "%s\n%s\n", pr.p, pr.s)
	}
	cmd = exec.Command(busybox, "sh", "-c", judge)
	cmd.Env = []string{"PATH=" + bbDir, "GVISORGEN_SCRIPTS=" + scriptsDir}
	cmd.Stdin = strings.NewReader(in.String())
	out, err = cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	got = strings.Fields(string(out))
	if len(got) != len(pairs) {
		t.Fatalf("%d verdicts for %d generated pairs: %s", len(got), len(pairs), out)
	}
	matched, bad := 0, 0
	for i, pr := range pairs {
		want, err := filepath.Match(pr.p, pr.s)
		if err != nil {
			bad++
		}
		if want {
			matched++
		}
		if (got[i] == "y") != want {
			t.Errorf("glob(%q, %q) = %v, Go's filepath.Match says %v (%v)", pr.p, pr.s, got[i] == "y", want, err)
		}
	}
	t.Logf("%d generated pairs: %d match, %d malformed", len(pairs), matched, bad)
	if matched < 100 || bad < 100 {
		t.Errorf("%d of %d generated pairs match and %d are malformed: the generator no longer exercises both", matched, len(pairs), bad)
	}
}
