package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/gvisorgen/gvisorgen/internal/artifact/testkms"
)

func TestMain(m *testing.M) {
	// The test binary is gvisorgen itself when the kill test runs it as a
	// subprocess (it needs a real process to SIGKILL).
	if os.Getenv("GVISORGEN_TEST_MAIN") == "1" {
		mainExit()
	}
	testscript.Main(m, map[string]func(){
		"gvisorgen": mainExit,
		// a KMS plugin (sigstore's protocol) whose KMS is a key file: push --key testkms://<path>
		"sigstore-kms-testkms": func() { os.Exit(testkms.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
		// expect CODE ARGS... runs gvisorgen ARGS and succeeds only when it
		// exits with CODE, so scripts can assert the exact exit code.
		"expect": func() {
			tuneGC()
			want := os.Args[1]
			got := run(os.Args[2:], os.Stdin, os.Stdout, os.Stderr)
			if strconv.Itoa(got) != want {
				fmt.Fprintf(os.Stderr, "expect: exit code %d, want %s\n", got, want)
				os.Exit(99)
			}
			os.Exit(0)
		},
	})
}

// heavyScripts are the scripts make test leaves to make test-heavy (which
// .ci/run runs): the ones that run gvisorgen most often (each run evaluates
// the module, some 0.6 s of CPU), so that make test stays an inner loop. Each
// name is a file of testdata/script; TestHeavyScriptsExist holds them so.
var heavyScripts = []string{
	"badinput", "cache", "cache-forged", "diff", "errors", "frontdoor-component-names", "frontdoor-inputs",
	"frontdoor-policy", "frontdoor-symlinks", "pin", "policy", "push", "delivery-oci", "values",
	// A hand-written kustomization beside the generated one, and the cache's interplay with such refusals (with the
	// cache scripts above; make test keeps leftovers, the same rule for any file gvisorgen did not write).
	"frontdoor-cache-kustomization", "frontdoor-cache-patch-links", "frontdoor-kustomization-spelling",
	// In process in make test: internal/tree's TestKilledAtEveryStep (a write failing or killed at each step),
	// TestPrunable and TestPlanForeign (what is pruned, what is reported), internal/warn's grouping, internal/schema's
	// encoder and gen's TestCommittedTreeIsFresh (the schema file fresh).
	"frontdoor-immutable", "prune", "warnings", "schema",
}

// heavyEnv set to 1 (make test-heavy) runs the heavy scripts instead of the others.
const heavyEnv = "GVISORGEN_TEST_HEAVY"

// scripts is the script files of this run: the heavy ones or the others.
func scripts(t *testing.T, heavy bool) []string {
	all, err := filepath.Glob("testdata/script/*.txtar")
	if err != nil || len(all) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	var out []string
	for _, f := range all {
		if slices.Contains(heavyScripts, strings.TrimSuffix(filepath.Base(f), ".txtar")) == heavy {
			out = append(out, f)
		}
	}
	return out
}

func TestHeavyScriptsExist(t *testing.T) {
	for _, h := range heavyScripts {
		if _, err := os.Stat(filepath.Join("testdata/script", h+".txtar")); err != nil {
			t.Errorf("heavyScripts names %s: %v", h, err)
		}
	}
}

// TestScripts runs the CLI against a copy of the repository's CUE module:
// every script starts from a fresh repo with cue/ and nothing else. make test
// runs all but heavyScripts, make test-heavy (GVISORGEN_TEST_HEAVY=1) those.
func TestScripts(t *testing.T) {
	cueDir, err := filepath.Abs("../../cue")
	if err != nil {
		t.Fatal(err)
	}
	driftSh, err := filepath.Abs("../../ci/drift.sh")
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Files: scripts(t, os.Getenv(heavyEnv) == "1"),
		Setup: func(env *testscript.Env) error {
			// The cache of fresh trees lives in the script's own folder,
			// never in the real ~/.cache.
			env.Setenv("XDG_CACHE_HOME", filepath.Join(env.WorkDir, ".cache"))
			env.Setenv("GVISORGEN_CACHE_DIR", "")
			env.Setenv("GVISORGEN_CACHE", "")
			env.Setenv("GVISORGEN_CACHE_DEBUG", "")
			// CI's drift gate, for the scripts that run it as CI does.
			env.Setenv("DRIFT_SH", driftSh)
			return os.CopyFS(filepath.Join(env.WorkDir, "cue"), os.DirFS(cueDir))
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"snapshot":   snapshot,
			"backdate":   backdate,
			"treehash":   treehash,
			"mirror":     mirror,
			"immutable":  immutable,
			"forgecache": forgecache,
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "root":
				return os.Geteuid() == 0, nil
			case "chattr":
				return chattrWorks(), nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
	})
}

// backdate: every file of the work folder (the cache aside) an hour old, as
// inputs are when nobody edits them during a run (the cache stores nothing
// when an input was written within its slack of the run's start).
func backdate(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: backdate")
	}
	old := time.Now().Add(-time.Hour)
	err := filepath.WalkDir(ts.MkAbs("."), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".cache" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			return os.Chtimes(p, old, old)
		}
		return nil
	})
	if err != nil {
		ts.Fatalf("backdate: %v", err)
	}
}

// snapshot save NAME | snapshot same NAME: records the tree's files (paths,
// bytes and mtimes) and later asserts that nothing changed, not even an mtime.
func snapshot(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: snapshot save|same NAME")
	}
	state := func() string {
		var s string
		for _, top := range []string{"overlays", "generated"} {
			root := ts.MkAbs(top)
			_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				info, err := d.Info()
				if err != nil {
					return err
				}
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				rel, _ := filepath.Rel(ts.MkAbs("."), p)
				s += rel + " " + info.ModTime().String() + " " + string(b) + "\n"
				return nil
			})
		}
		return s
	}
	file := ts.MkAbs(".snapshot-" + args[1])
	switch args[0] {
	case "save":
		if err := os.WriteFile(file, []byte(state()), 0o644); err != nil {
			ts.Fatalf("%v", err)
		}
	case "same":
		b, err := os.ReadFile(file)
		if err != nil {
			ts.Fatalf("%v", err)
		}
		same := string(b) == state()
		if same == neg {
			ts.Fatalf("tree changed since snapshot %s: %v", args[1], !same)
		}
	default:
		ts.Fatalf("usage: snapshot save|same NAME")
	}
}
