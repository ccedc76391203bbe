//go:build clustertest

package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// TestRestrictedSmokePodProvesGVisor (scenario 2s): the generated smoke namespace enforces Pod Security restricted
// (a root pod is refused by the API server), the generated smoke pod is admitted there and succeeds under gVisor as
// nobody with its check ("Starting gVisor" in dmesg), and the very same pod without runtimeClassName, i.e. under
// runc, fails that check (exit 1): the host kernel refuses an unprivileged syslog read.
func TestRestrictedSmokePodProvesGVisor(t *testing.T) {
	forEachVersion(t, func(ctx context.Context, t *testing.T, c *Cluster) {
		c.ensureInstalled(ctx, t, vGood)
		c.smokePV(ctx, t)
		c.smoke(ctx, t)

		ns, err := c.Admin.CoreV1().Namespaces().Get(ctx, smokeNS, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if l := ns.Labels["pod-security.kubernetes.io/enforce"]; l != "restricted" {
			t.Fatalf("namespace %s enforces %q, want restricted", smokeNS, l)
		}
		root := gvisorProbe.pod()
		root.Namespace, root.Name = smokeNS, "root-probe"
		_, err = c.Admin.CoreV1().Pods(smokeNS).Create(ctx, root, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `violates PodSecurity "restricted:latest"`) {
			t.Fatalf("a root pod in %s: want refused by PodSecurity restricted, got %v", smokeNS, err)
		}
		t.Logf("  .. a root pod in %s is refused: %s", smokeNS, clip(err.Error(), 200))

		p, err := c.Admin.CoreV1().Pods(smokeNS).Get(ctx, smokePod, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("  .. under gVisor: %s %s as uid %d", p.Name, p.Status.Phase, *p.Spec.SecurityContext.RunAsUser)

		// The same pod under runc.
		b, err := os.ReadFile(filepath.Join(c.smokeDir(), "pod-gvisor-smoke.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var twin corev1.Pod
		if err := yaml.UnmarshalStrict(b, &twin); err != nil {
			t.Fatal(err)
		}
		twin.Name, twin.Spec.RuntimeClassName = "gvisor-smoke-runc", nil
		c.deletePod(ctx, t, smokeNS, twin.Name)
		if _, err := c.Admin.CoreV1().Pods(smokeNS).Create(ctx, &twin, metav1.CreateOptions{}); err != nil {
			t.Fatalf("the smoke pod without runtimeClassName: %v", err)
		}
		rp, err := c.WaitPodPhase(ctx, smokeNS, twin.Name, corev1.PodFailed, 60*time.Second)
		if err != nil {
			t.Fatalf("under runc the smoke pod must fail its check: %v", err)
		}
		log, _ := c.Logs(ctx, smokeNS, twin.Name, "", false)
		code := int32(-1)
		if s := rp.Status.ContainerStatuses; len(s) == 1 && s[0].State.Terminated != nil {
			code = s[0].State.Terminated.ExitCode
		}
		t.Logf("  .. under runc: %s Failed, exit %d, log: %s", twin.Name, code, strings.ReplaceAll(strings.TrimSpace(log), "\n", " | "))
		if code != 1 || strings.Contains(log, "] Starting gVisor") || !strings.Contains(log, "not gVisor") {
			t.Errorf("under runc: exit %d, log %q; want exit 1, the check's message and no gVisor kernel log", code, log)
		}
		c.deletePod(ctx, t, smokeNS, twin.Name)
	})
}
