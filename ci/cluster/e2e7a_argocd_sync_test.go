//go:build clustertest

package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The Argo CD scenarios change the cluster only by commits, as the Flux ones do: the e2e target with Argo CD's
// delivery values below, committed and pushed to the served repository; the generated AppProject and the target's
// Application are applied once, as docs/gitops.md says, and nothing hand-written.

// argoValues: the e2e target's delivery: Argo CD only (no Flux objects in delivery/e2e/).
const argoValues = `delivery:
  flux: {enabled: false}
`

// argoFleet sets the repository once for the fleet, in a CUE file of the module's package as cue/delivery.cue
// tells a user to: the Application and the AppProject's sourceRepos name the served repository.
const argoFleet = "package gvisorgen\n\nfleet: repoURL: \"" + repoURL + "\"\n"

const argoApp = "gvisor-e2e" // the generated Application

// argoCommit commits the target for version and mode with Argo CD's delivery values, after a generate of every
// target (the AppProject is the fleet's: a --target run leaves it alone).
func (c *Cluster) argoCommit(ctx context.Context, t *testing.T, version, mode string, edit func(string) string, msg string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(c.Repo, "cue", "zz_e2e_fleet.cue"), []byte(argoFleet), 0o644); err != nil {
		t.Fatal(err)
	}
	e := func(y string) string {
		if edit != nil {
			y = edit(y)
		}
		return y
	}
	return c.commitTarget(ctx, t, version, mode, argoValues, true, e, msg)
}

// argoApplied applies the generated AppProject and the target's Application (delivery/appproject-gvisor.yaml,
// delivery/e2e/application-gvisor-e2e.yaml) unless the Application exists; it reports whether it did.
func (c *Cluster) argoApplied(ctx context.Context, t *testing.T) bool {
	t.Helper()
	if _, _, err := c.appGet(ctx, argoApp); err == nil {
		return true
	}
	files, _ := filepath.Glob(filepath.Join(c.Repo, "delivery/e2e/*"))
	if len(files) != 1 || filepath.Base(files[0]) != "application-"+argoApp+".yaml" {
		t.Fatalf("delivery/e2e/ holds %v, want only application-%s.yaml (the target turns Flux off)", files, argoApp)
	}
	// the project first: an Application of a project that does not exist yet is refused at its first comparison
	for i, f := range []string{"delivery/appproject-gvisor.yaml", "delivery/e2e/application-" + argoApp + ".yaml"} {
		b, err := os.ReadFile(filepath.Join(c.Repo, f))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), repoURL) {
			t.Fatalf("%s does not name the served repository %s:\n%s", f, repoURL, b)
		}
		d := filepath.Join(c.Dir, "argocd-apply", fmt.Sprint(i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
		objs, err := ReadObjects(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if err := c.Apply(ctx, o); err != nil {
				t.Fatalf("apply %s: %v", f, err)
			}
		}
	}
	t.Logf("  .. applied delivery/appproject-gvisor.yaml and delivery/e2e/application-%s.yaml (namespace %s)", argoApp, argoNS)
	return false
}

// argoSync commits the target for version and mode and waits until Argo CD synced it, Synced and Healthy.
func (c *Cluster) argoSync(ctx context.Context, t *testing.T, version, mode string, edit func(string) string, msg string) appStatus {
	t.Helper()
	c.argocd(ctx, t)
	sha := c.argoCommit(ctx, t, version, mode, edit, msg)
	if c.argoApplied(ctx, t) {
		c.appRefresh(ctx, t, argoApp)
	}
	s := c.waitApp(ctx, t, argoApp, syncRollout, "commit "+sha[:12]+" Synced and Healthy", syncedHealthy(sha), nil)
	c.installed = version
	if mode == "uninstall" {
		c.installed = ""
	}
	return s
}

// TestArgoCDFirstSyncHealthyAfterTheInstaller (Argo CD 1, make e2e-argocd): the e2e target committed and only the
// generated AppProject and Application applied: Argo CD's repo-server builds overlays/e2e with kustomize, its
// controller syncs every object in its waves (the project allows each kind and the destination), and the
// Application turns Synced and Healthy only once the installer DaemonSet rolled out (Argo CD's health of a
// DaemonSet, checked at every poll); one containerd restart, and a gVisor pod logs "Starting gVisor".
func TestArgoCDFirstSyncHealthyAfterTheInstaller(t *testing.T) {
	forEachVersion(t, func(ctx context.Context, t *testing.T, c *Cluster) {
		t0 := time.Now()
		c.ensureRunning(ctx, t, runcSleeper)
		r0 := c.Restarts()
		c.argocd(ctx, t)
		sha := c.argoCommit(ctx, t, vGood, "install", nil, "e2e target: gVisor "+vGood+" through Argo CD")
		if c.argoApplied(ctx, t) {
			t.Fatal("the Application existed before the first sync")
		}
		early, first := 0, ""
		s := c.waitApp(ctx, t, argoApp, syncRollout, "first sync Synced and Healthy", syncedHealthy(sha), func(ctx context.Context, s appStatus) {
			// Argo CD's application health is Healthy while its sync operation still runs and the DaemonSet of a
			// later wave does not exist yet (seen: "waiting for healthy state of /Namespace/gvisor-system", the
			// DaemonSet not found): an object not yet created does not count. Done, for a user (`argocd app wait`)
			// and for CI, is Synced, Healthy and the operation Succeeded: that must not come before the rollout.
			if s.health != "Healthy" || s.sync != "Synced" || s.opPhase != "Succeeded" || s.revision != sha {
				return
			}
			ds, err := c.Admin.AppsV1().DaemonSets(installerNS).Get(ctx, installerDS, metav1.GetOptions{})
			if err != nil || !DaemonSetRolledOut(ds) {
				if early++; first == "" {
					first = fmt.Sprintf("%s; DaemonSet: %v", s, err)
					if err == nil {
						first += fmt.Sprintf(" generation %d status %+v", ds.Generation, ds.Status)
					}
				}
			}
		})
		c.installed = vGood
		if early > 0 {
			t.Errorf("the Application was Synced and Healthy, its sync Succeeded, %d times while the installer DaemonSet had not rolled out; the first: %s", early, first)
		}
		if s.resourceStatuses == 0 || len(s.outOfSync) > 0 {
			t.Errorf("resources: %d, out of sync: %v", s.resourceStatuses, s.outOfSync)
		}
		if v := c.stamp("version"); v != vGood {
			t.Errorf("stamp says version %q, want %s", v, vGood)
		}
		if n := c.Restarts() - r0; n != 1 {
			t.Errorf("containerd restarts by the first sync: %d, want 1", n)
		}
		t.Logf("  .. synced (+%.1fs): %d resources Synced, stamp %s, %d containerd restart", time.Since(t0).Seconds(),
			s.resourceStatuses, c.stamp("version"), c.Restarts()-r0)
		c.smokePV(ctx, t)
		c.smoke(ctx, t)
		c.untouched(ctx, t, runcSleeper.name)
	})
}

// ensureArgoSynced gives a scenario run alone the state the first leaves: Argo CD synced the target installing vGood.
func (c *Cluster) ensureArgoSynced(ctx context.Context, t *testing.T) {
	t.Helper()
	c.argocd(ctx, t) // first: it makes the dynamic client appGet uses
	if s, _, err := c.appGet(ctx, argoApp); err == nil && s.sync == "Synced" && s.health == "Healthy" && c.installed != "" {
		return
	}
	c.ensureRunning(ctx, t, runcSleeper)
	c.argoSync(ctx, t, vGood, "install", nil, "e2e target: gVisor "+vGood+" through Argo CD")
}

// TestArgoCDStaysSyncedAndHeals (Argo CD 2): after the sync, the controller compares the live objects with the
// commit again and again (every 10 s here) and finds nothing to change: Synced at each comparison and no new sync
// operation — no field the API server defaults or another controller writes shows as a diff (server-side apply, as
// generated). Then a hand edit of the RuntimeClass (a label's value, by another field manager, as kubectl edit does)
// makes it OutOfSync, and selfHeal puts the committed value back, with no containerd restart.
func TestArgoCDStaysSyncedAndHeals(t *testing.T) {
	forEachVersion(t, func(ctx context.Context, t *testing.T, c *Cluster) {
		c.ensureArgoSynced(ctx, t)
		r0 := c.Restarts()
		s0, _, err := c.appGet(ctx, argoApp)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{s0.reconciledAt: true}
		c.waitApp(ctx, t, argoApp, 90*time.Second, "three more comparisons, each Synced", func(s appStatus) bool {
			return len(seen) >= 4
		}, func(ctx context.Context, s appStatus) {
			if seen[s.reconciledAt] {
				return
			}
			seen[s.reconciledAt] = true
			if s.sync != "Synced" || s.health != "Healthy" || len(s.outOfSync) > 0 {
				t.Errorf("comparison at %s: %s", s.reconciledAt, s)
			}
			if s.opStarted != s0.opStarted {
				t.Errorf("a new sync operation started at %s (the first at %s): %s", s.opStarted, s0.opStarted, s)
			}
		})

		rc, err := c.Admin.NodeV1().RuntimeClasses().Get(ctx, "gvisor", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		const key = "app.kubernetes.io/part-of"
		want := rc.Labels[key]
		if want == "" {
			t.Fatalf("the RuntimeClass has no %s label: %v", key, rc.Labels)
		}
		rc.Labels[key] = "hand-edited"
		if _, err := c.Admin.NodeV1().RuntimeClasses().Update(ctx, rc, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
			t.Fatalf("the hand edit: %v", err)
		}
		t0 := time.Now()
		outOfSync := false
		c.waitApp(ctx, t, argoApp, 2*time.Minute, "the hand edit reverted by selfHeal", func(s appStatus) bool {
			rc, err := c.Admin.NodeV1().RuntimeClasses().Get(ctx, "gvisor", metav1.GetOptions{})
			return err == nil && rc.Labels[key] == want && s.sync == "Synced" && s.opStarted != s0.opStarted
		}, func(ctx context.Context, s appStatus) {
			if s.sync == "OutOfSync" {
				outOfSync = true
			}
		})
		s, _, _ := c.appGet(ctx, argoApp)
		t.Logf("  .. reverted %.1fs after the edit by the operation started at %s (%s); OutOfSync seen: %t",
			time.Since(t0).Seconds(), s.opStarted, clip(s.opMsg, 120), outOfSync)
		if n := c.Restarts() - r0; n != 0 {
			t.Errorf("containerd restarts: %d, want 0", n)
		}
	})
}
