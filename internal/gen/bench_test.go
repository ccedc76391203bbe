package gen

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gvisorgen/gvisorgen/internal/eval"
)

// fleet makes a repository with n extra targets (one YAML file each).
// unpinnedWaiver lets a test target of a profile that requires pins
// generate where nothing can be pinned (no network), as the example targets do.
const unpinnedWaiver = "policy:\n  waive:\n    unpinned-release: test fleet, nothing can be pinned here\n    unpinned-image: test fleet, nothing can be pinned here\n"

func fleet(b testing.TB, n int) string {
	dir := b.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "cue"), os.DirFS(filepath.Join(repoRoot, "cue"))); err != nil {
		b.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "targets"), 0o755); err != nil {
		b.Fatal(err)
	}
	profiles := []string{"kind", "gke", "eks"}
	for i := 0; i < n; i++ {
		body := fmt.Sprintf("profile: %s\ngvisor:\n  nodeSelector:\n    pool: p%d\n", profiles[i%3], i%7)
		if profiles[i%3] != "kind" {
			body += unpinnedWaiver
		}
		if err := os.WriteFile(filepath.Join(dir, "targets", fmt.Sprintf("c%04d.yaml", i)), []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

// BenchmarkBuild evaluates and renders a fleet in memory (no writes).
func BenchmarkBuild(b *testing.B) {
	for _, n := range []int{3, 30, 100} {
		b.Run(fmt.Sprintf("targets=%d", n+3), func(b *testing.B) {
			dir := fleet(b, n)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := Build(eval.Options{Root: dir}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
