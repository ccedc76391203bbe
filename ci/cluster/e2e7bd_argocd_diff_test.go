//go:build clustertest

package cluster

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestArgoCDDiffNamesWhatGvisorgenDiffNames (Argo CD, review): on one commit pair, Argo CD's own comparison and
// `gvisorgen diff` name the same changed objects. The target's Application with automated sync off
// (delivery.argocd.automated.enabled: false), synced by hand to the base commit (a sync operation, as `argocd app
// sync` starts one); the head commit bumps the release; after a refresh the Application is OutOfSync, and the
// objects it reports OutOfSync are exactly those whose files `gvisorgen diff --base <base> --head <head>` lists under
// generated/e2e/. The Application is then deleted (its finalizer removes its objects). Runs after the removal
// scenario, on a cluster with no Application of the target.
func TestArgoCDDiffNamesWhatGvisorgenDiffNames(t *testing.T) {
	forEachVersion(t, func(ctx context.Context, t *testing.T, c *Cluster) {
		c.argocd(ctx, t)
		if _, _, err := c.appGet(ctx, argoApp); err == nil {
			t.Skip("the target's Application exists (run after TestArgoCDRemovalAsDocumented, or alone)")
		}
		c.ensureRunning(ctx, t, runcSleeper)
		manual := func(y string) string { return y + "  argocd: {automated: {enabled: false}}\n" }
		base := c.argoCommit(ctx, t, vGood, "install", manual, "diff: the base, automated sync off")
		c.argoApplied(ctx, t)
		op := []byte(`{"operation":{"sync":{"revision":"` + base + `"},"initiatedBy":{"username":"gvisorgen-e2e"}}}`)
		if _, err := c.dyn.Resource(appGVR).Namespace(argoNS).Patch(ctx, argoApp, types.MergePatchType, op, metav1.PatchOptions{}); err != nil {
			t.Fatalf("start a sync: %v", err)
		}
		c.waitApp(ctx, t, argoApp, syncRollout, "the base synced by hand", syncedHealthy(base), nil)
		c.installed = vGood
		head := c.argoCommit(ctx, t, vUp, "install", manual, "diff: the head, a bump")
		c.appRefresh(ctx, t, argoApp)
		s := c.waitApp(ctx, t, argoApp, 2*time.Minute, "the head compared, OutOfSync", func(s appStatus) bool {
			return s.revision == head && s.sync == "OutOfSync"
		}, nil)
		var argo []string
		for _, r := range s.outOfSync {
			kind, name, _ := strings.Cut(r, "/")
			argo = append(argo, strings.ToLower(kind)+"-"+name+".yaml")
		}
		slices.Sort(argo)
		// exit 1: a difference (the wanted outcome); the summary table names each changed file of generated/e2e/
		out, _ := c.gvisorgen(ctx, "diff", "--root", c.Repo, "--base", base, "--head", head, "--target", "e2e", "--format", "markdown")
		var ours []string
		for _, m := range regexp.MustCompile("(?m)^\\| e2e \\| `([^`/]+\\.yaml)` \\|").FindAllStringSubmatch(out, -1) {
			ours = append(ours, m[1])
		}
		slices.Sort(ours)
		t.Logf("  .. Argo CD OutOfSync: %v\n  .. gvisorgen diff:     %v", argo, ours)
		if len(ours) == 0 || !slices.Equal(argo, ours) {
			t.Errorf("Argo CD and gvisorgen diff name different objects:\n  Argo CD: %v\n  gvisorgen: %v\n%s", argo, ours, clip(out, 2000))
		}
		if err := c.dyn.Resource(appGVR).Namespace(argoNS).Delete(ctx, argoApp, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitGone(ctx, t, "Application "+argoApp, func(ctx context.Context) error {
			_, err := c.dyn.Resource(appGVR).Namespace(argoNS).Get(ctx, argoApp, metav1.GetOptions{})
			return err
		})
	})
}
