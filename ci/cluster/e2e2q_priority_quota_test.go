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
)

const (
	quotaName  = "runsc-installer-priority"
	gkeRefusal = "insufficient quota to match these scopes"
)

// TestGKEPriorityQuotaAdmitsTheInstaller (scenario 2q): on an API server configured as GKE's is (admission.go:
// ResourceQuota limitedResources for pods of the critical classes), the installer's pods exist only thanks to the
// generated ResourceQuota. Rendered with priorityQuota.create: false, the quota leaves the tree (and the cluster, as
// Argo CD's prune would remove it); the DaemonSet's next pod is refused with GKE's message (a FailedCreate event of
// the DaemonSet) and no installer pod exists. Rendered again with the default, the quota is applied and the
// DaemonSet's pod is created and Ready, without a containerd restart (the re-run is idempotent).
func TestGKEPriorityQuotaAdmitsTheInstaller(t *testing.T) {
	forEachVersion(t, func(ctx context.Context, t *testing.T, c *Cluster) {
		c.ensureInstalled(ctx, t, vGood)
		r0 := c.Restarts()
		quotaFile := filepath.Join(c.generatedDir(), "resourcequota-"+quotaName+".yaml")
		if !exists(quotaFile) {
			t.Fatalf("the generated tree has no %s", filepath.Base(quotaFile))
		}

		// Without the quota.
		c.noQuota = true
		defer func() { c.noQuota, c.generated = false, "" }()
		c.target(ctx, t, vGood, "install")
		if exists(quotaFile) {
			t.Fatalf("priorityQuota.create: false still renders %s", filepath.Base(quotaFile))
		}
		c.applyGenerated(ctx, t)
		if err := c.Admin.CoreV1().ResourceQuotas(installerNS).Delete(ctx, quotaName, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete the ResourceQuota (as Argo CD's prune would): %v", err)
		}
		old, err := c.InstallerPod(ctx)
		if err != nil {
			t.Fatal(err)
		}
		zero := int64(0)
		if err := c.Admin.CoreV1().Pods(installerNS).Delete(ctx, old.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
		msg, err := c.WaitEvent(ctx, installerNS, installerDS, "FailedCreate", gkeRefusal, 60*time.Second)
		if err != nil {
			t.Fatalf("without the quota: %v", err)
		}
		t.Logf("  .. without the quota: DaemonSet FailedCreate: %s", msg)
		if err := Poll(ctx, 500*time.Millisecond, 30*time.Second, "the old installer pod gone", func(ctx context.Context) (bool, error) {
			_, err := c.Admin.CoreV1().Pods(installerNS).Get(ctx, old.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		}); err != nil {
			t.Fatal(err)
		}
		pods, err := c.Admin.CoreV1().Pods(installerNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) != 0 {
			t.Fatalf("without the quota, %d installer pods exist (%s, ...)", len(pods.Items), pods.Items[0].Name)
		}
		t.Logf("  .. without the quota: no installer pod in %s", installerNS)

		// With the quota (the default).
		c.noQuota = false
		c.target(ctx, t, vGood, "install")
		b, err := os.ReadFile(quotaFile)
		if err != nil {
			t.Fatalf("the default renders no quota: %v", err)
		}
		if !strings.Contains(string(b), "scopeName: PriorityClass") {
			t.Fatalf("%s is not scoped to the priority class:\n%s", filepath.Base(quotaFile), b)
		}
		t0 := time.Now()
		c.applyGenerated(ctx, t)
		if err := c.WaitRollout(ctx, t, installRollout); err != nil {
			t.Fatalf("with the quota: %v", err)
		}
		p, err := c.InstallerPod(ctx)
		if err != nil {
			t.Fatal(err)
		}
		q, err := c.Admin.CoreV1().ResourceQuotas(installerNS).Get(ctx, quotaName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		used := q.Status.Used["pods"]
		t.Logf("  .. with the quota: installer pod %s Ready %.1fs after the apply; quota used pods=%s", p.Name, time.Since(t0).Seconds(), used.String())
		if used.Value() != 1 {
			t.Errorf("the quota counts %s pods, want 1 (the installer's)", used.String())
		}
		if n := c.Restarts() - r0; n != 0 {
			t.Errorf("containerd restarted %d times", n)
		}
	})
}
