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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// The Flux scenarios change the cluster only by commits: the e2e target (c.target: values, pin, generate) plus the
// delivery values below, committed and pushed to the served repository; the delivery objects of delivery/e2e/ are
// applied once, at the first sync.

// fluxValues: the e2e target's delivery: the served repository, short intervals (a commit is seen within 20 s, a
// failed reconcile retried after 10 s), a timeout that fits an uninstall waiting for kubelet's container GC, and no
// Argo CD Application (no Argo CD here: only Flux's objects are generated into delivery/e2e/).
const fluxValues = `delivery:
  repoURL: ` + repoURL + `
  revision: main
  argocd: {enabled: false}
  flux: {interval: 20s, retryInterval: 10s, timeout: 5m}
`

const fluxName = "gvisor-e2e" // the generated GitRepository and Kustomization

var (
	gitRepoGVR = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "gitrepositories"}
	ksGVR      = schema.GroupVersionResource{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Resource: "kustomizations"}
)

// fluxCommit commits the target for version and mode with Flux's delivery values (commitTarget).
func (c *Cluster) fluxCommit(ctx context.Context, t *testing.T, version, mode string, edit func(string) string, msg string) string {
	t.Helper()
	r := c.flux(ctx, t)
	sha := c.commitTarget(ctx, t, version, mode, fluxValues, false, edit, msg)
	r.head = sha
	return sha
}

// commitTarget renders the target for version and mode the documented way (c.target), adds the delivery values and
// edit's change (nil: none), generates again (every target with fleet: the fleet's objects too, which a --target run
// leaves alone), commits everything and pushes to the served repository (gitRig): it returns the commit.
func (c *Cluster) commitTarget(ctx context.Context, t *testing.T, version, mode, delivery string, fleet bool, edit func(string) string, msg string) string {
	t.Helper()
	c.gitRig(ctx, t)
	c.target(ctx, t, version, mode)
	b, err := os.ReadFile(c.targetFile())
	if err != nil {
		t.Fatal(err)
	}
	y := string(b) + delivery
	if edit != nil {
		y = edit(y)
	}
	if err := os.WriteFile(c.targetFile(), []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"generate", "--root", c.Repo, "--target", "e2e"}
	if fleet {
		args = args[:3]
	}
	if out, err := c.gvisorgen(ctx, args...); err != nil {
		t.Fatalf("gvisorgen %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	for _, a := range [][]string{{"add", "-A"}, {"commit", "-q", "-m", msg}, {"push", "-q", "origin", "HEAD:main"}} {
		if _, err := c.git(ctx, a...); err != nil {
			t.Fatal(err)
		}
	}
	sha, err := c.git(ctx, "rev-parse", "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	stat, _ := c.git(ctx, "show", "--stat", "--format=", "HEAD")
	st := strings.Split(stat, "\n")
	t.Logf("  .. committed %.12s %q: %s", sha, msg, strings.TrimSpace(st[len(st)-1]))
	return sha
}

// fluxStatus is what a Flux object reports: its Ready condition, and the revisions it attempted and applied
// (GitRepository: its artifact's).
type fluxStatus struct {
	ready            string // True, False, Unknown, or "" when there is no Ready condition yet
	reason, message  string
	since            time.Time // the Ready condition's lastTransitionTime
	applied, attempt string    // Kustomization: lastAppliedRevision, lastAttemptedRevision; GitRepository: artifact
	current          bool      // status.observedGeneration == metadata.generation
	handled          string    // status.lastHandledReconcileAt
}

func (c *Cluster) fluxGet(ctx context.Context, gvr schema.GroupVersionResource) (fluxStatus, error) {
	var s fluxStatus
	u, err := c.dyn.Resource(gvr).Namespace(fluxNS).Get(ctx, fluxName, metav1.GetOptions{})
	if err != nil {
		return s, err
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, x := range conds {
		m, _ := x.(map[string]any)
		if m["type"] == "Ready" {
			s.ready, _ = m["status"].(string)
			s.reason, _ = m["reason"].(string)
			s.message, _ = m["message"].(string)
			lt, _ := m["lastTransitionTime"].(string)
			s.since, _ = time.Parse(time.RFC3339, lt)
		}
	}
	og, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	s.current = og == u.GetGeneration()
	s.handled, _, _ = unstructured.NestedString(u.Object, "status", "lastHandledReconcileAt")
	if gvr != ksGVR {
		s.applied, _, _ = unstructured.NestedString(u.Object, "status", "artifact", "revision")
	} else {
		s.applied, _, _ = unstructured.NestedString(u.Object, "status", "lastAppliedRevision")
		s.attempt, _, _ = unstructured.NestedString(u.Object, "status", "lastAttemptedRevision")
	}
	return s, nil
}

// fluxReconcile asks for a reconcile now, as flux reconcile does: the requestedAt annotation on the GitRepository
// (with source) and on the Kustomization. It returns the token the objects report as handled.
func (c *Cluster) fluxReconcile(ctx context.Context, t *testing.T, withSource bool) string {
	t.Helper()
	tok := time.Now().UTC().Format(time.RFC3339Nano)
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{"reconcile.fluxcd.io/requestedAt":%q}}}`, tok))
	gvrs := []schema.GroupVersionResource{ksGVR}
	if withSource {
		gvrs = []schema.GroupVersionResource{c.flux(context.Background(), t).source, ksGVR}
	}
	for _, g := range gvrs {
		if _, err := c.dyn.Resource(g).Namespace(fluxNS).Patch(ctx, fluxName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("reconcile %s: %v", g.Resource, err)
		}
	}
	return tok
}

// waitFlux waits (bounded) until the Kustomization's status satisfies cond; each poll also reads the GitRepository
// and calls also (when not nil: an invariant the scenario checks throughout). It returns the last status.
func (c *Cluster) waitFlux(ctx context.Context, t *testing.T, timeout time.Duration, what string, cond func(fluxStatus) bool, also func(ctx context.Context, ks fluxStatus)) fluxStatus {
	t.Helper()
	t0 := time.Now()
	var ks, src fluxStatus
	source := c.flux(ctx, t).source
	err := Poll(ctx, 500*time.Millisecond, timeout, "Flux: "+what, func(ctx context.Context) (bool, error) {
		var err error
		if src, err = c.fluxGet(ctx, source); err != nil {
			return false, err
		}
		if ks, err = c.fluxGet(ctx, ksGVR); err != nil {
			return false, err
		}
		if also != nil {
			also(ctx, ks)
		}
		return cond(ks), nil
	})
	if err != nil {
		t.Fatalf("%v\n  %s: Ready=%s %s: %s (artifact %s)\n  Kustomization: Ready=%s %s: %s (applied %s, attempted %s)",
			err, source.Resource, src.ready, src.reason, src.message, src.applied, ks.ready, ks.reason, ks.message, ks.applied, ks.attempt)
	}
	t.Logf("  .. Flux: %s in %.1fs (Kustomization Ready=%s %s, applied %s)", what, time.Since(t0).Seconds(), ks.ready, ks.reason, ks.applied)
	return ks
}

// appliedReady: the Kustomization applied commit sha, its health checks passed (wait: true), nothing newer pending.
func appliedReady(sha string) func(fluxStatus) bool {
	return func(s fluxStatus) bool {
		return s.current && s.ready == "True" && strings.HasSuffix(s.applied, sha) && strings.HasSuffix(s.attempt, sha)
	}
}

// fluxSync commits the target for version and mode and waits until Flux applied it (Ready: the installer rolled
// out); the first time, the delivery objects of delivery/e2e/ are applied first. trigger: ask for the reconcile
// (else the GitRepository's interval finds the commit).
func (c *Cluster) fluxSync(ctx context.Context, t *testing.T, version, mode string, edit func(string) string, msg string, trigger bool) fluxStatus {
	t.Helper()
	r := c.flux(ctx, t)
	sha := c.fluxCommit(ctx, t, version, mode, edit, msg)
	if !c.fluxApplied(ctx, t) {
		trigger = false // a new GitRepository fetches at once
	}
	if trigger {
		c.fluxReconcile(ctx, t, true)
	}
	ks := c.waitFlux(ctx, t, syncRollout, fmt.Sprintf("%.12s applied and Ready", sha), appliedReady(sha), nil)
	r.synced = version + " " + mode
	c.installed = version
	if mode == "uninstall" {
		c.installed = ""
	}
	return ks
}

// fluxApplied applies delivery/e2e/ (the GitRepository and the Kustomization, nothing else) unless it was; it
// reports whether they were there already.
func (c *Cluster) fluxApplied(ctx context.Context, t *testing.T) bool {
	t.Helper()
	if _, err := c.fluxGet(ctx, ksGVR); err == nil {
		return true
	}
	d := filepath.Join(c.Repo, "delivery/e2e")
	files, _ := filepath.Glob(filepath.Join(d, "*"))
	for i := range files {
		files[i] = filepath.Base(files[i])
	}
	sort.Strings(files)
	if want := "gitrepository-gvisor-e2e.yaml kustomization-gvisor-e2e.yaml"; strings.Join(files, " ") != want {
		t.Fatalf("delivery/e2e/ holds %v, want only %s (the target turns the Argo CD Application off)", files, want)
	}
	if b, _ := os.ReadFile(filepath.Join(d, "gitrepository-gvisor-e2e.yaml")); !strings.Contains(string(b), "url: "+repoURL+"\n") {
		t.Fatalf("the generated GitRepository does not point at %s:\n%s", repoURL, b)
	}
	if err := c.ApplyDir(ctx, d); err != nil {
		t.Fatalf("apply of delivery/e2e/: %v", err)
	}
	t.Logf("  .. applied delivery/e2e/ (GitRepository and Kustomization %s/%s)", fluxNS, fluxName)
	return false
}

// ensureFluxSynced gives a scenario run alone the state the ones before leave: Flux has applied the target
// installing version ("": any, else the first release of fluxReleases).
func (c *Cluster) ensureFluxSynced(ctx context.Context, t *testing.T, version string) {
	t.Helper()
	r := c.flux(ctx, t)
	if strings.HasSuffix(r.synced, " install") && (version == "" || r.synced == version+" install") {
		return
	}
	if version == "" {
		version, _ = fluxReleases(c.V)
	}
	c.ensureRunning(ctx, t, runcSleeper)
	c.fluxSync(ctx, t, version, "install", nil, "e2e target: gVisor "+version, true)
}

// dumpFlux adds the Flux objects' status and the controllers' and git server's logs to a failure's dump.
func (c *Cluster) dumpFlux(p func(string, ...any)) {
	fluxMu.Lock()
	r := fluxRigs[c.V]
	fluxMu.Unlock()
	if r == nil || c.dyn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, g := range []schema.GroupVersionResource{r.source, ksGVR} {
		s, err := c.fluxGet(ctx, g)
		p("flux %s %s: Ready=%s %s: %s (applied %s, attempted %s; pushed %.12s) err=%v", g.Resource, fluxName,
			s.ready, s.reason, clip(s.message, 600), s.applied, s.attempt, r.head, err)
	}
	for _, f := range []string{"source-controller", "kustomize-controller", "git", "registry"} {
		s, err := tailFile(filepath.Join(c.Dir, "run/logs", f+".log"), 15)
		if err != nil {
			s = err.Error()
		}
		p("%s.log (tail):\n%s", f, indent(clipLines(s, 400), "    "))
	}
}
