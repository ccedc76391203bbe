//go:build clustertest

package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// dump logs what explains a failure: a describe-like summary of the node and every pod, the DaemonSet, PVCs and PVs,
// the last events, the logs of every container of the installer's pods (the previous run's too), the node's
// restart log and the tails of its node, kubelet and containerd logs, and the host folders the installer writes.
func (c *Cluster) dump(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("---- diagnostics of containerd %s's cluster (%s)", c.V, c.Dir)
	if c.Admin == nil {
		p("(no client)")
	} else {
		if n, err := c.Admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
			for _, x := range n.Items {
				var cs []string
				for _, cd := range x.Status.Conditions {
					cs = append(cs, fmt.Sprintf("%s=%s", cd.Type, cd.Status))
				}
				var gl []string // the readiness gate's labels (and any other node-restriction one)
				for k, v := range x.Labels {
					if strings.HasPrefix(k, "node-restriction.kubernetes.io/") {
						gl = append(gl, k+"="+v)
					}
				}
				sort.Strings(gl)
				p("node %s: %s; labels %s", x.Name, strings.Join(cs, " "), strings.Join(gl, " "))
			}
		} else {
			p("nodes: %v", err)
		}
		if l, err := c.Admin.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err == nil {
			for i := range l.Items {
				describePod(p, &l.Items[i])
			}
		} else {
			p("pods: %v", err)
		}
		if l, err := c.Admin.AppsV1().DaemonSets("").List(ctx, metav1.ListOptions{}); err == nil {
			for _, d := range l.Items {
				s := d.Status
				p("daemonset %s/%s: generation %d observed %d, desired %d updated %d ready %d available %d",
					d.Namespace, d.Name, d.Generation, s.ObservedGeneration, s.DesiredNumberScheduled, s.UpdatedNumberScheduled, s.NumberReady, s.NumberAvailable)
			}
		}
		if l, err := c.Admin.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{}); err == nil {
			for _, x := range l.Items {
				p("pvc %s/%s: %s volume %s", x.Namespace, x.Name, x.Status.Phase, x.Spec.VolumeName)
			}
		}
		if l, err := c.Admin.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{}); err == nil {
			for _, x := range l.Items {
				p("pv %s: %s", x.Name, x.Status.Phase)
			}
		}
		if l, err := c.Admin.CoreV1().Events("").List(ctx, metav1.ListOptions{}); err == nil {
			ev := l.Items
			sort.SliceStable(ev, func(i, j int) bool { return eventTime(ev[i]).Before(eventTime(ev[j])) })
			if len(ev) > 25 {
				ev = ev[len(ev)-25:]
			}
			p("events (last %d):", len(ev))
			for _, e := range ev {
				p("  %s %s %s/%s %s: %s", eventTime(e).Format("15:04:05"), e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, clip(e.Message, 300))
			}
		}
		if l, err := c.Admin.CoreV1().Pods(installerNS).List(ctx, metav1.ListOptions{}); err == nil {
			for _, x := range l.Items {
				for _, s := range append(append([]corev1.ContainerStatus{}, x.Status.InitContainerStatuses...), x.Status.ContainerStatuses...) {
					for _, prev := range []bool{true, false} {
						if prev && s.LastTerminationState.Terminated == nil {
							continue
						}
						if !prev && s.State.Waiting != nil && s.LastTerminationState.Terminated == nil {
							p("log of %s %s: none (never started: %s)", x.Name, s.Name, s.State.Waiting.Reason)
							continue
						}
						log, err := c.Logs(ctx, installerNS, x.Name, s.Name, prev)
						if err != nil {
							log = err.Error()
						}
						tag := s.Name
						if prev {
							tag += " (previous)"
						}
						p("log of %s %s (tail):\n%s", x.Name, tag, indent(tail(log, 30), "    "))
					}
				}
			}
		}
	}
	p("restart log (systemd.log):\n%s", indent(strings.Join(c.RestartLog(), "\n"), "    "))
	for _, f := range []string{"systemctl", "node", "kubelet", "containerd", "kube-proxy"} {
		s, err := tailFile(filepath.Join(c.Dir, "run/logs", f+".log"), 15)
		if err != nil {
			s = err.Error()
		}
		p("%s.log (tail):\n%s", f, indent(clipLines(s, 300), "    "))
	}
	c.dumpFlux(p) // the Flux run only (e2e8_flux_sync_test.go)
	c.dumpArgo(p) // the Argo CD run only (e2e7_argocd_test.go)
	for _, d := range []string{"/etc/containerd", "/usr/local/bin"} {
		p("%s: %s", d, lsDir(c.HostPath(d)))
	}
	t.Log(b.String())
}

func describePod(p func(string, ...any), x *corev1.Pod) {
	ph, r := PodPhaseReason(x)
	rc := ""
	if x.Spec.RuntimeClassName != nil {
		rc = " runtimeClass " + *x.Spec.RuntimeClassName
	}
	p("pod %s/%s: %s (%s)%s", x.Namespace, x.Name, ph, r, rc)
	for _, s := range append(append([]corev1.ContainerStatus{}, x.Status.InitContainerStatuses...), x.Status.ContainerStatuses...) {
		st := "?"
		switch {
		case s.State.Running != nil:
			st = "running"
		case s.State.Waiting != nil:
			st = "waiting " + s.State.Waiting.Reason + ": " + clip(s.State.Waiting.Message, 200)
		case s.State.Terminated != nil:
			st = fmt.Sprintf("terminated %s exit %d", s.State.Terminated.Reason, s.State.Terminated.ExitCode)
		}
		p("  %s: %s, ready %v, restarts %d", s.Name, st, s.Ready, s.RestartCount)
	}
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

func lsDir(d string) string {
	es, err := os.ReadDir(d)
	if err != nil {
		return err.Error()
	}
	var n []string
	for _, e := range es {
		n = append(n, e.Name())
	}
	return strings.Join(n, " ")
}

func tail(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

func indent(s, pre string) string { return pre + strings.ReplaceAll(s, "\n", "\n"+pre) }

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func clipLines(s string, n int) string {
	l := strings.Split(s, "\n")
	for i := range l {
		l[i] = clip(l[i], n)
	}
	return strings.Join(l, "\n")
}
