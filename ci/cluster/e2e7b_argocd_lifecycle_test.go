//go:build clustertest

package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestArgoCDVersionBumpRollsTheInstaller (Argo CD 3): gvisor.version bumped (20240212 -> 20260801, binaries ->
// archive layout) by a commit and nothing else: the automated sync applies it, the DaemonSet rolls with the new
// GVISOR_VERSION, the stamp names the new release, containerd is not restarted, and a gVisor pod running since
// before the bump is untouched, still execs, stops and is deleted by its own release's runsc, whose folder the next
// run removes (acrossBump).
func TestArgoCDVersionBumpRollsTheInstaller(t *testing.T) {
	forEachVersion(t, func(ctx context.Context, t *testing.T, c *Cluster) {
		c.ensureArgoSynced(ctx, t)
		first, next := c.installed, vUp
		c.onRelease(ctx, t, gvisorSleeper, first)
		r0 := c.Restarts()
		ds0, err := c.Admin.AppsV1().DaemonSets(installerNS).Get(ctx, installerDS, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c.argoSync(ctx, t, next, "install", nil, "bump gVisor to "+next)
		if err := c.WaitRollout(ctx, t, installRollout); err != nil {
			t.Fatal(err)
		}
		ds, err := c.Admin.AppsV1().DaemonSets(installerNS).Get(ctx, installerDS, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ds.Generation == ds0.Generation {
			t.Errorf("the DaemonSet did not roll: generation %d", ds.Generation)
		}
		if v := envOf(ds.Spec.Template.Spec.InitContainers, "install-runsc", "GVISOR_VERSION"); v != next {
			t.Errorf("install-runsc's GVISOR_VERSION is %q, want %s", v, next)
		}
		if v := c.stamp("version"); v != next {
			t.Errorf("stamp says version %q, want %s", v, next)
		}
		if n := c.Restarts() - r0; n != 0 {
			t.Errorf("the bump restarted containerd %d times, want 0", n)
		}
		t.Logf("  .. DaemonSet generation %d -> %d, stamp %s", ds0.Generation, ds.Generation, c.stamp("version"))
		c.untouched(ctx, t, gvisorSleeper.name)
		c.untouched(ctx, t, runcSleeper.name)
		c.acrossBump(ctx, t, gvisorSleeper.name, next)
		c.smoke(ctx, t)
	})
}

// TestArgoCDRefusesAKindTheProjectForbids (Argo CD 4): a commit that bypasses generate (what `make check` fails in
// CI, pushed anyway) adds a Secret to overlays/e2e and changes the DaemonSet in the same commit: the AppProject's
// allow-list, not gvisorgen, stops it — the sync fails with Argo CD's own message, nothing of the commit is applied
// (the DaemonSet keeps its generation) and the node does not change. The next commit, generated again, syncs.
func TestArgoCDRefusesAKindTheProjectForbids(t *testing.T) {
	forEachVersion(t, func(ctx context.Context, t *testing.T, c *Cluster) {
		c.ensureArgoSynced(ctx, t)
		r0, stamp0 := c.Restarts(), c.stamp("version")
		ds0, err := c.Admin.AppsV1().DaemonSets(installerNS).Get(ctx, installerDS, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ov := filepath.Join(c.Repo, "overlays/e2e")
		secret := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: smuggled\n  namespace: " + installerNS + "\nstringData:\n  k: v\n"
		if err := os.WriteFile(filepath.Join(ov, "secret-smuggled.yaml"), []byte(secret), 0o644); err != nil {
			t.Fatal(err)
		}
		kb, err := os.ReadFile(filepath.Join(ov, "kustomization.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		k := strings.Replace(string(kb), "\nresources:\n", "\nresources:\n- secret-smuggled.yaml\n", 1)
		// and a change the sync would roll, were it applied
		k += "commonAnnotations:\n  e2e.gvisorgen.dev/smuggled: \"true\"\n"
		if err := os.WriteFile(filepath.Join(ov, "kustomization.yaml"), []byte(k), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, a := range [][]string{{"add", "-A"}, {"commit", "-q", "-m", "a Secret, by hand"}, {"push", "-q", "origin", "HEAD:main"}} {
			if _, err := c.git(ctx, a...); err != nil {
				t.Fatal(err)
			}
		}
		sha, err := c.git(ctx, "rev-parse", "HEAD")
		if err != nil {
			t.Fatal(err)
		}
		c.appRefresh(ctx, t, argoApp)
		s := c.waitApp(ctx, t, argoApp, 2*time.Minute, "the commit refused", func(s appStatus) bool {
			return s.revision == sha && strings.Contains(s.opMsg+strings.Join(s.conditions, " "), "not permitted in project")
		}, nil)
		t.Logf("  .. refused: operation %s: %s; conditions %v", s.opPhase, clip(s.opMsg, 300), s.conditions)
		ds, err := c.Admin.AppsV1().DaemonSets(installerNS).Get(ctx, installerDS, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ds.Generation != ds0.Generation || ds.Annotations["e2e.gvisorgen.dev/smuggled"] != "" {
			t.Errorf("the DaemonSet changed: generation %d -> %d, annotations %v", ds0.Generation, ds.Generation, ds.Annotations)
		}
		if _, err := c.Admin.CoreV1().Secrets(installerNS).Get(ctx, "smuggled", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the Secret: %v, want not found", err)
		}
		if n := c.Restarts() - r0; n != 0 || c.stamp("version") != stamp0 {
			t.Errorf("the node changed: %d containerd restarts, stamp %s -> %s", n, stamp0, c.stamp("version"))
		}
		// the failed operation retries (retry.limit 5, back-off up to 5 min) and holds off the next automated sync:
		// end it as `argocd app terminate-op` does (the API server sets the operation's phase to Terminating)
		c.appTerminateOp(ctx, t, argoApp)
		// back: the generated tree committed again (generate restores overlays/e2e and reports the stray file)
		if err := os.Remove(filepath.Join(ov, "secret-smuggled.yaml")); err != nil {
			t.Fatal(err)
		}
		// the live objects never changed, so the commit is Synced at once, with no operation to run
		fixed := c.argoCommit(ctx, t, c.installed, "install", nil, "overlays/e2e generated again")
		c.appRefresh(ctx, t, argoApp)
		c.waitApp(ctx, t, argoApp, 2*time.Minute, "the generated commit Synced", func(s appStatus) bool {
			return s.revision == fixed && s.sync == "Synced" && s.health == "Healthy"
		}, nil)
	})
}

// TestArgoCDRemovalAsDocumented (Argo CD 5): docs/gitops.md's "Removing gVisor from a cluster" through commits, then
// the Application deleted: the gVisor pods drained, `gvisor.installer.mode: uninstall` committed (Synced and Healthy
// once the uninstall finished: config.toml byte-identical to the original, one containerd restart), `gvisor.enabled:
// false` committed (Argo CD prunes the DaemonSet, the RuntimeClass and the namespace), then the Application deleted:
// its resources finalizer deletes what is left (the StorageClass), and no object gvisorgen made is left in the
// cluster. runc pods run throughout; the node stays clean.
func TestArgoCDRemovalAsDocumented(t *testing.T) {
	forEachVersion(t, func(ctx context.Context, t *testing.T, c *Cluster) {
		c.ensureArgoSynced(ctx, t)
		c.ensureRunning(ctx, t, runcSleeper)
		version := c.installed
		c.drainGVisorPods(ctx, t)
		stop := c.sampleRunscContainers(t)
		r0 := c.Restarts()
		c.argoSync(ctx, t, version, "uninstall", nil, "uninstall gVisor")
		if err := c.WaitRollout(ctx, t, installRollout); err != nil {
			t.Fatal(err)
		}
		stop()
		clean := func(when string) { t.Helper(); c.cleanAfterUninstall(t, r0, when) }
		clean("uninstall synced")
		c.argoSync(ctx, t, version, "uninstall", gvisorOff, "gvisor.enabled: false")
		waitGone(ctx, t, "RuntimeClass gvisor", func(ctx context.Context) error {
			_, err := c.Admin.NodeV1().RuntimeClasses().Get(ctx, "gvisor", metav1.GetOptions{})
			return err
		})
		waitGone(ctx, t, "Namespace "+installerNS, func(ctx context.Context) error {
			_, err := c.Admin.CoreV1().Namespaces().Get(ctx, installerNS, metav1.GetOptions{})
			return err
		})
		clean("after the prune")
		t0 := time.Now()
		if err := c.dyn.Resource(appGVR).Namespace(argoNS).Delete(ctx, argoApp, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitGone(ctx, t, "Application "+argoApp+" (its finalizer done)", func(ctx context.Context) error {
			_, err := c.dyn.Resource(appGVR).Namespace(argoNS).Get(ctx, argoApp, metav1.GetOptions{})
			return err
		})
		waitGone(ctx, t, "StorageClass gvisor-workspace", func(ctx context.Context) error {
			_, err := c.Admin.StorageV1().StorageClasses().Get(ctx, "gvisor-workspace", metav1.GetOptions{})
			return err
		})
		sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=gvisorgen"}
		var left []string
		if l, err := c.Admin.RbacV1().ClusterRoles().List(ctx, sel); err == nil {
			for _, o := range l.Items {
				left = append(left, "ClusterRole/"+o.Name)
			}
		}
		if l, err := c.Admin.RbacV1().ClusterRoleBindings().List(ctx, sel); err == nil {
			for _, o := range l.Items {
				left = append(left, "ClusterRoleBinding/"+o.Name)
			}
		}
		if l, err := c.Admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().List(ctx, sel); err == nil {
			for _, o := range l.Items {
				left = append(left, "ValidatingAdmissionPolicy/"+o.Name)
			}
		}
		if l, err := c.Admin.StorageV1().StorageClasses().List(ctx, sel); err == nil {
			for _, o := range l.Items {
				left = append(left, "StorageClass/"+o.Name)
			}
		}
		if len(left) > 0 {
			t.Errorf("objects gvisorgen made are left after the Application's deletion: %v", left)
		}
		t.Logf("  .. Application deleted and its resources with it in %.1fs; nothing labelled managed-by=gvisorgen left", time.Since(t0).Seconds())
		clean("after the Application's deletion")
		c.untouched(ctx, t, runcSleeper.name)
		c.checkNewRuncPod(ctx, t)
		c.installed = ""
	})
}

// appTerminateOp ends the Application's running operation, as argocd app terminate-op does (the operation's phase set
// to Terminating; the controller stops it). A finished operation is left alone.
func (c *Cluster) appTerminateOp(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	s, _, err := c.appGet(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if s.opPhase != "Running" {
		return
	}
	patch := []byte(`{"status":{"operationState":{"phase":"Terminating"}}}`)
	if _, err := c.dyn.Resource(appGVR).Namespace(argoNS).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("terminate the operation of %s: %v", name, err)
	}
	c.waitApp(ctx, t, name, time.Minute, "the operation terminated", func(s appStatus) bool {
		return s.opPhase != "Running" && s.opPhase != "Terminating"
	}, nil)
}
