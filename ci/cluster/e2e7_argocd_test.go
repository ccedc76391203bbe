//go:build clustertest

package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// The Argo CD rig (make e2e-argocd, ci/cluster/README.md "Argo CD"): Argo CD's own application-controller,
// repo-server and applicationset-controller (ci/argocd/build.sh: one binary built from its module, cached) and
// redis (Debian's) run as processes in the node's network and PID namespaces, beside the git server of the Flux rig.
// Argo CD is installed from its own manifests of the same version (CRDs, ConfigMaps, Secret, service accounts and
// RBAC; not its Deployments: the processes stand in for them), and each controller talks to the API server with its
// own service account's token, so Argo CD's RBAC is what it runs with. The in-cluster destination
// (https://kubernetes.default.svc) is that same config: ARGOCD_FAKE_IN_CLUSTER, the switch Argo CD's own local
// development uses, reads it from KUBECONFIG instead of a pod's service-account mount.
const (
	argoNS        = "argocd"
	argoRedis     = "127.0.0.1:16379"
	argoRepo      = "127.0.0.1:18081" // repo-server gRPC (plaintext)
	argoRepoMet   = "18084"           // repo-server metrics
	argoCtrlMet   = "18082"           // application-controller metrics
	argoSetMet    = "127.0.0.1:18085" // applicationset-controller metrics
	argoSetProbe  = "127.0.0.1:18086" // applicationset-controller health
	argoAppResync = 10                // seconds between the controller's comparisons (default 120)
)

var (
	appGVR     = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"}
	appProjGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "appprojects"}
	appSetGVR  = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applicationsets"}
)

// argoManifests: what the e2e applies from Argo CD's manifests folder (its base and cluster-rbac, as install.yaml
// composes them), by folder: every *.yaml but the kustomizations and the workloads the processes replace.
var argoManifests = []string{
	"crds", "base/config", "base/application-controller-roles", "cluster-rbac/application-controller",
	"base/applicationset-controller", "cluster-rbac/applicationset-controller",
}

// argoSkipped: files of those folders that are not applied (workloads, their Services and NetworkPolicies).
func argoSkipped(name string) bool {
	return name == "kustomization.yaml" || strings.HasSuffix(name, "-deployment.yaml") ||
		strings.HasSuffix(name, "-service.yaml") || strings.HasSuffix(name, "-network-policy.yaml")
}

type argoRig struct {
	dir string // ci/argocd/build.sh's cache folder
}

var (
	argoMu   sync.Mutex
	argoRigs = map[string]*argoRig{}
)

func argoDir() (string, error) {
	out, err := exec.Command("sh", filepath.Join(repoRoot, "ci/argocd/build.sh"), "--dir").Output()
	if err != nil {
		return "", fmt.Errorf("ci/argocd/build.sh --dir: %w", err)
	}
	d := strings.TrimSpace(string(out))
	for _, f := range []string{"argocd", ".complete", filepath.Join("manifests", "crds"), filepath.Join("hack", "git-verify-wrapper.sh")} {
		if !exists(filepath.Join(d, f)) {
			return "", fmt.Errorf("%s has no %s: run sh ci/argocd/build.sh (make e2e-argocd does)", d, f)
		}
	}
	return d, nil
}

// argocd returns the cluster's Argo CD, installing it the first time: manifests, the git server (the Flux rig's:
// c.Repo pushed to a bare repository over HTTP), redis and the three controllers, ready.
func (c *Cluster) argocd(ctx context.Context, t *testing.T) *argoRig {
	t.Helper()
	argoMu.Lock()
	r := argoRigs[c.V]
	argoMu.Unlock()
	if r != nil {
		return r
	}
	t0 := time.Now()
	dir, err := argoDir()
	if err != nil {
		t.Fatal(err)
	}
	r = &argoRig{dir: dir}
	if err := c.argoInstall(ctx, dir); err != nil {
		t.Fatalf("Argo CD's manifests: %v", err)
	}
	c.gitRig(ctx, t)
	run := filepath.Join(c.Dir, "argocd")
	bin := filepath.Join(run, "bin")
	for _, d := range []string{bin, filepath.Join(run, "tmp"), filepath.Join(run, "home")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	kz := os.Getenv("KUSTOMIZE")
	if kz == "" {
		t.Fatal("KUSTOMIZE is not set: the repo-server runs kustomize from PATH (make e2e-argocd sets it)")
	}
	// the repo-server runs `kustomize` and Argo CD's git-verify-wrapper.sh from PATH (a copy: the module's file is
	// not executable, as Argo CD's image makes it)
	_ = os.Remove(filepath.Join(bin, "kustomize"))
	if err := os.Symlink(kz, filepath.Join(bin, "kustomize")); err != nil {
		t.Fatal(err)
	}
	wrapper, err := os.ReadFile(filepath.Join(dir, "hack/git-verify-wrapper.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "git-verify-wrapper.sh"), wrapper, 0o755); err != nil {
		t.Fatal(err)
	}
	ctrlKC := c.saKubeconfig(ctx, t, "argocd-application-controller")
	setKC := c.saKubeconfig(ctx, t, "argocd-applicationset-controller")
	base := []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "HOME=" + filepath.Join(run, "home"),
		"TMPDIR=" + filepath.Join(run, "tmp"), "ARGOCD_GPG_ENABLED=false"}
	redis, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server is not installed (make e2e-argocd installs Debian's)")
	}
	procs := []struct {
		name string
		args []string
		env  []string
	}{
		{"redis", []string{redis, "--port", strings.Split(argoRedis, ":")[1], "--bind", "127.0.0.1", "--save", "",
			"--appendonly", "no", "--dir", run}, nil},
		{"argocd-repo-server", []string{filepath.Join(dir, "argocd-repo-server"), "--port", strings.Split(argoRepo, ":")[1],
			"--metrics-port", argoRepoMet, "--redis", argoRedis, "--disable-tls", "--client-ca-path=", "--loglevel", "info"}, nil},
		{"argocd-application-controller", []string{filepath.Join(dir, "argocd-application-controller"),
			"--namespace", argoNS, "--kubeconfig", ctrlKC, "--redis", argoRedis, "--repo-server", argoRepo,
			"--repo-server-plaintext", "--metrics-port", argoCtrlMet, "--app-resync", fmt.Sprint(argoAppResync),
			"--app-resync-jitter", "0", "--self-heal-backoff-timeout-seconds", "1", "--status-processors", "2",
			"--operation-processors", "2", "--loglevel", "info"},
			[]string{"KUBECONFIG=" + ctrlKC, "ARGOCD_FAKE_IN_CLUSTER=true"}},
		{"argocd-applicationset-controller", []string{filepath.Join(dir, "argocd-applicationset-controller"),
			"--namespace", argoNS, "--kubeconfig", setKC, "--argocd-repo-server", argoRepo, "--repo-server-plaintext",
			"--metrics-addr", argoSetMet, "--probe-addr", argoSetProbe, "--enable-leader-election=false", "--loglevel", "info"},
			[]string{"KUBECONFIG=" + setKC}},
	}
	for _, p := range procs {
		args := append([]string{"-t", fmt.Sprint(c.pid), "-n", "-p", "--"}, p.args...)
		if err := c.startInNode(p.name, args, append(append([]string{}, base...), p.env...)...); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range []struct{ name, url string }{
		{"argocd-repo-server", "http://127.0.0.1:" + argoRepoMet + "/metrics"},
		{"argocd-application-controller", "http://127.0.0.1:" + argoCtrlMet + "/metrics"},
		// its probe server registers no check (404): the metrics server answers once the manager started
		{"argocd-applicationset-controller", "http://" + argoSetMet + "/metrics"},
	} {
		if err := c.waitHTTP(ctx, w.url, 90*time.Second); err != nil {
			log, _ := tailFile(filepath.Join(c.Dir, "run/logs", w.name+".log"), 20)
			t.Fatalf("%s not ready: %v\n%s", w.name, err, log)
		}
	}
	t.Logf("  .. Argo CD up in %.1fs: its manifests applied, redis, repo-server, application-controller and "+
		"applicationset-controller running, git at %s", time.Since(t0).Seconds(), repoURL)
	argoMu.Lock()
	argoRigs[c.V] = r
	argoMu.Unlock()
	return r
}

// argoInstall applies argoManifests: the namespace first, then every object, in Argo CD's namespace when it is
// namespaced (as install.yaml's kustomization sets it).
func (c *Cluster) argoInstall(ctx context.Context, dir string) error {
	stage := filepath.Join(c.Dir, "argocd-install")
	if err := os.MkdirAll(stage, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(stage, "00-namespace.yaml"), []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: "+argoNS+"}\n"), 0o644); err != nil {
		return err
	}
	for i, m := range argoManifests {
		files, err := filepath.Glob(filepath.Join(dir, "manifests", m, "*.yaml"))
		if err != nil || len(files) == 0 {
			return fmt.Errorf("%s: no files (%v)", filepath.Join(dir, "manifests", m), err)
		}
		for _, f := range files {
			if argoSkipped(filepath.Base(f)) {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(stage, fmt.Sprintf("%02d-%s", i+1, filepath.Base(f))), b, 0o644); err != nil {
				return err
			}
		}
	}
	objs, err := ReadObjects(stage)
	if err != nil {
		return err
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding":
		default:
			if o.GetNamespace() == "" {
				o.SetNamespace(argoNS)
			}
		}
		if err := c.Apply(ctx, o); err != nil {
			return err
		}
		// as ApplyDir: the controllers start next, and one started on a kind discovery does not serve yet may exit
		if awaited(o) {
			if err := c.waitHealthy(ctx, o); err != nil {
				return err
			}
		}
	}
	return nil
}

// saKubeconfig writes a kubeconfig with a token of a service account of Argo CD's namespace (TokenRequest, an hour).
func (c *Cluster) saKubeconfig(ctx context.Context, t *testing.T, sa string) string {
	t.Helper()
	exp := int64(3600)
	tr, err := c.Admin.CoreV1().ServiceAccounts(argoNS).CreateToken(ctx, sa,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of %s: %v", sa, err)
	}
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: node
  cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}
users:
- name: %[1]s
  user: {token: %[2]q}
contexts:
- name: %[1]s
  context: {cluster: node, user: %[1]s, namespace: %[3]s}
current-context: %[1]s
`, sa, tr.Status.Token, argoNS)
	p := filepath.Join(c.Dir, "argocd", sa+".kubeconfig")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// appStatus is what an Application reports.
type appStatus struct {
	sync, health     string // Synced/OutOfSync/Unknown; Healthy/Progressing/Degraded/Missing/...
	revision         string // status.sync.revision
	reconciledAt     string
	opPhase, opMsg   string // status.operationState
	opStarted        string
	opRevision       string // status.operationState.syncResult.revision
	conditions       []string
	outOfSync        []string // kind/name of resources not Synced
	resourceStatuses int
}

func (c *Cluster) appGet(ctx context.Context, name string) (appStatus, *unstructured.Unstructured, error) {
	var s appStatus
	u, err := c.dyn.Resource(appGVR).Namespace(argoNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return s, nil, err
	}
	o := u.Object
	s.sync, _, _ = unstructured.NestedString(o, "status", "sync", "status")
	s.revision, _, _ = unstructured.NestedString(o, "status", "sync", "revision")
	s.health, _, _ = unstructured.NestedString(o, "status", "health", "status")
	s.reconciledAt, _, _ = unstructured.NestedString(o, "status", "reconciledAt")
	s.opPhase, _, _ = unstructured.NestedString(o, "status", "operationState", "phase")
	s.opMsg, _, _ = unstructured.NestedString(o, "status", "operationState", "message")
	s.opStarted, _, _ = unstructured.NestedString(o, "status", "operationState", "startedAt")
	s.opRevision, _, _ = unstructured.NestedString(o, "status", "operationState", "syncResult", "revision")
	conds, _, _ := unstructured.NestedSlice(o, "status", "conditions")
	for _, x := range conds {
		m, _ := x.(map[string]any)
		s.conditions = append(s.conditions, fmt.Sprintf("%v: %v", m["type"], m["message"]))
	}
	res, _, _ := unstructured.NestedSlice(o, "status", "resources")
	s.resourceStatuses = len(res)
	for _, x := range res {
		m, _ := x.(map[string]any)
		if m["status"] != "Synced" {
			s.outOfSync = append(s.outOfSync, fmt.Sprintf("%v/%v", m["kind"], m["name"]))
		}
	}
	return s, u, nil
}

func (s appStatus) String() string {
	return fmt.Sprintf("sync=%s health=%s revision=%.12s operation=%s %q (revision %.12s) conditions=%v out-of-sync=%v",
		s.sync, s.health, s.revision, s.opPhase, clip(s.opMsg, 300), s.opRevision, s.conditions, s.outOfSync)
}

// waitApp waits (bounded) until the Application's status satisfies cond; also (when not nil) sees every poll.
func (c *Cluster) waitApp(ctx context.Context, t *testing.T, name string, timeout time.Duration, what string, cond func(appStatus) bool, also func(ctx context.Context, s appStatus)) appStatus {
	t.Helper()
	t0 := time.Now()
	var s appStatus
	err := Poll(ctx, 500*time.Millisecond, timeout, "Argo CD: "+what, func(ctx context.Context) (bool, error) {
		var err error
		if s, _, err = c.appGet(ctx, name); err != nil {
			return false, err
		}
		if also != nil {
			also(ctx, s)
		}
		return cond(s), nil
	})
	if err != nil {
		t.Fatalf("%v\n  Application %s: %s", err, name, s)
	}
	t.Logf("  .. Argo CD: %s in %.1fs (%s %s, revision %.12s)", what, time.Since(t0).Seconds(), s.sync, s.health, s.revision)
	return s
}

// syncedHealthy: the Application compared sha, found nothing to change, and every resource is healthy.
func syncedHealthy(sha string) func(appStatus) bool {
	return func(s appStatus) bool {
		return s.sync == "Synced" && s.health == "Healthy" && s.revision == sha && s.opPhase == "Succeeded" && s.opRevision == sha
	}
}

// appRefresh asks the controller to compare now (the refresh annotation the argocd CLI sets).
func (c *Cluster) appRefresh(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	patch := []byte(`{"metadata":{"annotations":{"argocd.argoproj.io/refresh":"normal"}}}`)
	if _, err := c.dyn.Resource(appGVR).Namespace(argoNS).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("refresh %s: %v", name, err)
	}
}

// dumpArgo adds the Applications' status and the Argo CD processes' logs to a failure's dump.
func (c *Cluster) dumpArgo(p func(string, ...any)) {
	argoMu.Lock()
	r := argoRigs[c.V]
	argoMu.Unlock()
	if r == nil || c.dyn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if l, err := c.dyn.Resource(appGVR).Namespace(argoNS).List(ctx, metav1.ListOptions{}); err == nil {
		for _, u := range l.Items {
			s, _, _ := c.appGet(ctx, u.GetName())
			p("argocd Application %s: %s", u.GetName(), s)
		}
	}
	for _, f := range []string{"argocd-application-controller", "argocd-repo-server", "argocd-applicationset-controller", "redis"} {
		s, err := tailFile(filepath.Join(c.Dir, "run/logs", f+".log"), 15)
		if err != nil {
			s = err.Error()
		}
		p("%s.log (tail):\n%s", f, indent(clipLines(s, 400), "    "))
	}
}
