//go:build clustertest

package cluster

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// syncRollout bounds a GitOps sync that rolls the installer out (Flux's Kustomization Ready, Argo CD's Application
// Synced and Healthy): the controller's apply, then an install that may fetch a 61 MB archive release with busybox
// wget over TLS, verify and unpack it. With the four cluster suites side by side on a 2-core machine where processes
// are costly (the slow kind, docs/testing.md), one such install-runsc took 3 min 46 s and another 4 min 13 s, and the
// whole sync more than the 5 minutes this was (2026-12-06); the generated Kustomization's own timeout is 30 minutes.
// The bounds catch a hung installer, not a slow one.
const syncRollout = 15 * time.Minute

// installRollout bounds an installer rollout the test applied itself, for the same reason (the agent suite's bump
// and Argo CD's took over the 150 s this was, and one over 5 minutes).
const installRollout = 12 * time.Minute

// sandboxRestart bounds a gVisor container's restart by the kubelet after a kill (its back-off, then a sandbox
// container started under that load: over 2 minutes once, 2026-12-06).
const sandboxRestart = 5 * time.Minute

// Poll runs cond every interval until it holds, for at most timeout (wait.PollUntilContextTimeout). An error of
// cond is not fatal (the API server may answer while containerd restarts under it): the last one is reported with
// the timeout. An error made by Stop ends the wait at once (a condition that can no longer hold).
func Poll(ctx context.Context, interval, timeout time.Duration, what string, cond func(context.Context) (bool, error)) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		var stop stopError
		if errors.As(err, &stop) {
			return false, err
		}
		if err != nil {
			if ctx.Err() == nil { // not the deadline's own "context deadline exceeded"
				last = err
			}
			return false, nil
		}
		return ok, nil
	})
	var stop stopError
	if errors.As(err, &stop) {
		return fmt.Errorf("%s: %w", what, stop.error)
	}
	if err != nil {
		if last != nil {
			return fmt.Errorf("%s: not within %s (last error: %v)", what, timeout, last)
		}
		return fmt.Errorf("%s: not within %s", what, timeout)
	}
	return nil
}

type stopError struct{ error }

// Stop makes an error that ends a Poll at once.
func Stop(err error) error { return stopError{err} }

// DaemonSetRolledOut is kubectl rollout status's condition for a DaemonSet: the controller saw the current spec,
// and every scheduled pod is updated and available.
func DaemonSetRolledOut(ds *appsv1.DaemonSet) bool {
	if ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType {
		return true
	}
	s := ds.Status
	return ds.Generation <= s.ObservedGeneration && s.DesiredNumberScheduled > 0 &&
		s.UpdatedNumberScheduled >= s.DesiredNumberScheduled && s.NumberAvailable >= s.DesiredNumberScheduled
}

// WaitRollout waits (bounded) for the installer DaemonSet to roll out, logging every init container failure seen
// meanwhile (its ERROR line: the kubelet retries them).
func (c *Cluster) WaitRollout(ctx context.Context, t *testing.T, timeout time.Duration) error {
	t.Helper()
	t0 := time.Now()
	seen := map[string]bool{}
	err := Poll(ctx, 500*time.Millisecond, timeout, "the installer DaemonSet's rollout", func(ctx context.Context) (bool, error) {
		ds, err := c.Admin.AppsV1().DaemonSets(installerNS).Get(ctx, installerDS, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p, err := c.InstallerPod(ctx); err == nil {
			for _, f := range c.initFailures(ctx, p, seen) {
				t.Logf("  +%.1fs %s", time.Since(t0).Seconds(), f)
			}
		}
		return DaemonSetRolledOut(ds), nil
	})
	if err == nil {
		t.Logf("  .. installer rolled out in %.1fs", time.Since(t0).Seconds())
	}
	return err
}

// initFailures lists the failed runs (current or previous) of a pod's init containers not in seen yet, each with its
// ERROR line, and adds them to seen.
func (c *Cluster) initFailures(ctx context.Context, p *corev1.Pod, seen map[string]bool) []string {
	var out []string
	for _, s := range p.Status.InitContainerStatuses {
		for _, r := range []struct {
			term     *corev1.ContainerStateTerminated
			previous bool
		}{{s.LastTerminationState.Terminated, true}, {s.State.Terminated, false}} {
			if r.term == nil || r.term.ExitCode == 0 || r.term.ContainerID == "" || seen[r.term.ContainerID] {
				continue
			}
			seen[r.term.ContainerID] = true
			log, err := c.Logs(ctx, p.Namespace, p.Name, s.Name, r.previous)
			out = append(out, fmt.Sprintf("%s exit %d: %s", s.Name, r.term.ExitCode, errLine(log, err)))
		}
	}
	return out
}

// errLine is a log's last ERROR line, or why there is none.
func errLine(log string, err error) string {
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], "ERROR") {
			return lines[i]
		}
	}
	return "(no ERROR line; log: " + lines[len(lines)-1] + ")"
}

// InstallerPod is the newest pod of the installer DaemonSet.
func (c *Cluster) InstallerPod(ctx context.Context) (*corev1.Pod, error) {
	l, err := c.Admin.CoreV1().Pods(installerNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + installerDS})
	if err != nil {
		return nil, err
	}
	if len(l.Items) == 0 {
		return nil, fmt.Errorf("no installer pod")
	}
	sort.Slice(l.Items, func(i, j int) bool {
		return l.Items[j].CreationTimestamp.Before(&l.Items[i].CreationTimestamp)
	})
	return &l.Items[0], nil
}

// Logs is a container's log (the previous run's with previous), as kubectl logs shows it.
func (c *Cluster) Logs(ctx context.Context, ns, pod, container string, previous bool) (string, error) {
	b, err := c.Admin.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, Previous: previous}).DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("logs of %s/%s -c %s: %w", ns, pod, container, err)
	}
	return string(b), nil
}

// WaitPod waits (bounded) until a pod satisfies cond, and returns it.
func (c *Cluster) WaitPod(ctx context.Context, ns, name string, timeout time.Duration, what string, cond func(*corev1.Pod) bool) (*corev1.Pod, error) {
	var p *corev1.Pod
	err := Poll(ctx, 250*time.Millisecond, timeout, fmt.Sprintf("pod %s/%s: %s", ns, name, what), func(ctx context.Context) (bool, error) {
		var err error
		p, err = c.Admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && cond(p), err
	})
	if err != nil && p != nil {
		ph, r := PodPhaseReason(p)
		err = fmt.Errorf("%w; it is %s (%s)", err, ph, r)
	}
	return p, err
}

// WaitPodPhase waits for a pod's phase.
func (c *Cluster) WaitPodPhase(ctx context.Context, ns, name string, phase corev1.PodPhase, timeout time.Duration) (*corev1.Pod, error) {
	return c.WaitPod(ctx, ns, name, timeout, "phase "+string(phase), func(p *corev1.Pod) bool { return p.Status.Phase == phase })
}

// PodPhaseReason is a pod's phase and why: the pod's own reason, else the first container's waiting or terminated
// reason (ContainerCreating, CrashLoopBackOff, Completed, Error…), else the reason of a false condition.
func PodPhaseReason(p *corev1.Pod) (corev1.PodPhase, string) {
	if p.Status.Reason != "" {
		return p.Status.Phase, p.Status.Reason
	}
	for _, s := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := s.State.Waiting; w != nil && w.Reason != "" {
			return p.Status.Phase, w.Reason
		}
		if x := s.State.Terminated; x != nil && x.Reason != "" && x.ExitCode != 0 {
			return p.Status.Phase, x.Reason
		}
	}
	for _, s := range p.Status.ContainerStatuses {
		if x := s.State.Terminated; x != nil && x.Reason != "" {
			return p.Status.Phase, x.Reason
		}
	}
	for _, cd := range p.Status.Conditions {
		if cd.Status != corev1.ConditionTrue && cd.Reason != "" {
			return p.Status.Phase, cd.Reason
		}
	}
	return p.Status.Phase, ""
}

// WaitPodPhaseReason waits for a pod (a RuntimeClass-scheduled one, typically) to be in phase with a reason
// containing reason (see PodPhaseReason).
func (c *Cluster) WaitPodPhaseReason(ctx context.Context, ns, name string, phase corev1.PodPhase, reason string, timeout time.Duration) (*corev1.Pod, error) {
	return c.WaitPod(ctx, ns, name, timeout, fmt.Sprintf("%s (%s)", phase, reason), func(p *corev1.Pod) bool {
		ph, r := PodPhaseReason(p)
		return ph == phase && strings.Contains(r, reason)
	})
}

// WaitEvent waits for an event about an object with a reason whose message contains msg, and returns the message.
func (c *Cluster) WaitEvent(ctx context.Context, ns, name, reason, msg string, timeout time.Duration) (string, error) {
	var found string
	err := Poll(ctx, 500*time.Millisecond, timeout, fmt.Sprintf("a %s event of %s/%s with %q", reason, ns, name, msg), func(ctx context.Context) (bool, error) {
		l, err := c.Admin.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + name + ",reason=" + reason,
		})
		if err != nil {
			return false, err
		}
		for _, e := range l.Items {
			if strings.Contains(e.Message, msg) {
				found = e.Message
				return true, nil
			}
		}
		return false, nil
	})
	return found, err
}

// waitGone waits (bounded: 90 s) until get reports its object not found (deleted, pruned); a timeout fails t but
// lets the scenario go on.
func waitGone(ctx context.Context, t *testing.T, what string, get func(context.Context) error) {
	t.Helper()
	if err := Poll(ctx, 250*time.Millisecond, 90*time.Second, what+" gone", func(ctx context.Context) (bool, error) {
		err := get(ctx)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}); err != nil {
		t.Error(err)
	}
}
