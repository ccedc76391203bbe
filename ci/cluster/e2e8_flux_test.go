//go:build clustertest

package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The GitOps rig of the Flux scenarios (make e2e-flux, ci/cluster/README.md "Flux"): Flux's own source-controller
// and kustomize-controller (ci/flux/build.sh) as processes beside the node's API server, and a git repository
// served over HTTP, all in the node's network namespace. The controllers enter its PID namespace too, so that they
// die with the node (TestMachineFilesUnchanged, Ctrl-C, a killed test binary: Pdeathsig kills the node).
const (
	fluxNS      = "flux-system"
	gitAddr     = "127.0.0.1:19418" // git http-backend (this test process, listening in the node's netns)
	storageAddr = "127.0.0.1:19090" // source-controller's artifact server, which kustomize-controller fetches from
	repoURL     = "http://" + gitAddr + "/gvisorgen.git"
)

// fluxControllers: each controller's ports in the node's network namespace (none may clash with the node's own:
// 6443, 10248-10259, 2379-2380, 18443).
var fluxControllers = []struct{ name, metrics, health string }{
	{"source-controller", "127.0.0.1:19080", "127.0.0.1:19440"},
	{"kustomize-controller", "127.0.0.1:19081", "127.0.0.1:19441"},
}

// fluxRig is one cluster's Flux: the bare repository the controllers read, and what was pushed last.
type fluxRig struct {
	bare   string // the bare repository http-backend serves (repoURL)
	head   string // the commit last pushed
	synced string // "<version> <mode>" of the last commit Flux applied (ensureFluxSynced)
	// source is the kind of the Kustomization's source: the GitRepository, or the OCIRepository once the OCI
	// scenario switched to it (TestFluxOCISignedArtifact).
	source schema.GroupVersionResource
}

var (
	fluxMu   sync.Mutex
	fluxRigs = map[string]*fluxRig{}
)

// fluxDir is ci/flux/build.sh's cache folder (binaries and crds/).
func fluxDir() (string, error) {
	out, err := exec.Command("sh", filepath.Join(repoRoot, "ci/flux/build.sh"), "--dir").Output()
	if err != nil {
		return "", fmt.Errorf("ci/flux/build.sh --dir: %w", err)
	}
	d := strings.TrimSpace(string(out))
	for _, f := range []string{"source-controller", "kustomize-controller", "crds"} {
		if !exists(filepath.Join(d, f)) {
			return "", fmt.Errorf("%s has no %s: run sh ci/flux/build.sh (make e2e-flux does)", d, f)
		}
	}
	return d, nil
}

// flux returns the cluster's Flux, installing it the first time: the CRDs (applied server side), the namespace, the
// git repository (c.Repo, pushed to a bare repository served over HTTP) and both controllers, Ready.
func (c *Cluster) flux(ctx context.Context, t *testing.T) *fluxRig {
	t.Helper()
	fluxMu.Lock()
	r := fluxRigs[c.V]
	fluxMu.Unlock()
	if r != nil {
		return r
	}
	t0 := time.Now()
	dir, err := fluxDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyDir(ctx, filepath.Join(dir, "crds")); err != nil {
		t.Fatalf("Flux CRDs: %v", err)
	}
	if err := c.ApplyDir(ctx, c.fluxNamespaceDir(t)); err != nil {
		t.Fatalf("namespace %s: %v", fluxNS, err)
	}
	r = &fluxRig{bare: c.gitRig(ctx, t), source: gitRepoGVR}
	for _, fc := range fluxControllers {
		if err := c.startController(dir, fc.name, fc.metrics, fc.health); err != nil {
			t.Fatal(err)
		}
	}
	for _, fc := range fluxControllers {
		if err := c.waitHTTP(ctx, "http://"+fc.health+"/readyz", 60*time.Second); err != nil {
			log, _ := tailFile(filepath.Join(c.Dir, "run/logs", fc.name+".log"), 20)
			t.Fatalf("%s not ready: %v\n%s", fc.name, err, log)
		}
	}
	t.Logf("  .. Flux up in %.1fs: CRDs applied, source-controller and kustomize-controller ready, git at %s",
		time.Since(t0).Seconds(), repoURL)
	fluxMu.Lock()
	fluxRigs[c.V] = r
	fluxMu.Unlock()
	return r
}

// fluxNamespaceDir writes the flux-system Namespace (what flux install creates first) into a folder of its own.
func (c *Cluster) fluxNamespaceDir(t *testing.T) string {
	d := filepath.Join(c.Dir, "flux-ns")
	os.MkdirAll(d, 0o755)
	if err := os.WriteFile(filepath.Join(d, "namespace.yaml"), []byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: "+fluxNS+"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return d
}

// startController starts one controller in the node's network and PID namespaces (nsenter -n -p: the machine's
// files, the node's loopback), with the admin kubeconfig, leader election off, its log in run/logs/.
func (c *Cluster) startController(dir, name, metrics, health string) error {
	args := []string{"-t", fmt.Sprint(c.pid), "-n", "-p", "--", filepath.Join(dir, name),
		"--enable-leader-election=false", "--log-encoding=console", "--events-addr=",
		"--metrics-addr=" + metrics, "--health-addr=" + health}
	if name == "source-controller" {
		store := filepath.Join(c.Dir, "flux-storage")
		if err := os.MkdirAll(store, 0o755); err != nil {
			return err
		}
		args = append(args, "--storage-path="+store, "--storage-addr="+storageAddr, "--storage-adv-addr="+storageAddr)
	}
	return c.startInNode(name, args, "KUBECONFIG="+filepath.Join(c.Dir, "conf/admin.kubeconfig"), "RUNTIME_NAMESPACE="+fluxNS)
}

// startInNode starts a process (nsenter's arguments: -t PID -n -p -- ARGV) in the node's network and PID
// namespaces, its output in run/logs/NAME.log.
func (c *Cluster) startInNode(name string, args []string, env ...string) error {
	logf, err := os.Create(filepath.Join(c.Dir, "run/logs", name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command("nsenter", args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// nsenter -p forks the process into the node's PID namespace, where it dies with the node's PID 1; nsenter
	// itself dies with this binary.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error)
	go func() {
		runtime.LockOSThread() // Pdeathsig follows the starting thread: keep it
		err := cmd.Start()
		started <- err
		if err == nil {
			cmd.Wait()
		}
		logf.Close()
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	return nil
}

// waitHTTP waits until a URL of the node's network namespace answers 200.
func (c *Cluster) waitHTTP(ctx context.Context, url string, timeout time.Duration) error {
	return c.waitURL(ctx, nil, url, timeout)
}

// waitURL waits until a URL of the node's network namespace answers 200, over TLS with tc for https.
func (c *Cluster) waitURL(ctx context.Context, tc *tls.Config, url string, timeout time.Duration) error {
	hc := &http.Client{Transport: &http.Transport{DialContext: c.dial, TLSClientConfig: tc}, Timeout: 5 * time.Second}
	return Poll(ctx, 250*time.Millisecond, timeout, url, func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := hc.Do(req)
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// serveGit serves the bare repositories under root with git http-backend (smart HTTP, read-only: receive-pack is
// off by default for unauthenticated requests) on gitAddr of the node's network namespace: the listening socket is
// made on a thread that entered it, and stays there. Every request is logged to run/logs/git.log.
func (c *Cluster) serveGit(root string) error {
	backend, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		return fmt.Errorf("git --exec-path: %w", err)
	}
	logf, err := os.Create(filepath.Join(c.Dir, "run/logs/git.log"))
	if err != nil {
		return err
	}
	h := &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(backend)), "git-http-backend"),
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	var mu sync.Mutex
	logged := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fmt.Fprintf(logf, "%s %s %s?%s\n", time.Now().Format("15:04:05.000"), r.Method, r.URL.Path, r.URL.RawQuery)
		mu.Unlock()
		h.ServeHTTP(w, r)
	})
	var l net.Listener
	if err := c.inNetns(func() (err error) { l, err = net.Listen("tcp", gitAddr); return err }); err != nil {
		return fmt.Errorf("git server on %s: %w", gitAddr, err)
	}
	go http.Serve(l, logged) // ends with this process (the node's namespace goes with it)
	return nil
}

// git runs git in the target's repository (c.Repo), as a user committing would.
func (c *Cluster) git(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", c.Repo}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=gvisorgen e2e", "GIT_AUTHOR_EMAIL=e2e@gvisorgen.invalid",
		"GIT_COMMITTER_NAME=gvisorgen e2e", "GIT_COMMITTER_EMAIL=e2e@gvisorgen.invalid", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("git %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

var (
	gitMu     sync.Mutex
	gitServed = map[string]string{} // cluster version -> the bare repository served at repoURL
)

// gitRig serves the cluster's git repository (once; the Flux and the Argo CD rigs share it): c.Repo becomes a git
// repository whose origin is a bare repository that serveGit serves at repoURL. It returns the bare repository.
func (c *Cluster) gitRig(ctx context.Context, t *testing.T) string {
	t.Helper()
	gitMu.Lock()
	defer gitMu.Unlock()
	if b, ok := gitServed[c.V]; ok {
		return b
	}
	bare := filepath.Join(c.Dir, "git/gvisorgen.git")
	if err := c.gitInit(ctx, bare); err != nil {
		t.Fatal(err)
	}
	if err := c.serveGit(filepath.Dir(bare)); err != nil {
		t.Fatal(err)
	}
	gitServed[c.V] = bare
	return bare
}

// gitInit makes c.Repo (the harness's copy of cue/ plus targets/) a git repository on branch main whose origin is
// the bare repository served over HTTP.
func (c *Cluster) gitInit(ctx context.Context, bare string) error {
	if out, err := exec.CommandContext(ctx, "git", "init", "-q", "--bare", "-b", "main", bare).CombinedOutput(); err != nil {
		return fmt.Errorf("git init --bare: %w\n%s", err, out)
	}
	// http-backend serves a repository only if git-daemon-export-ok exists or GIT_HTTP_EXPORT_ALL is set (it is)
	for _, a := range [][]string{{"init", "-q", "-b", "main"}, {"remote", "add", "origin", bare}} {
		if _, err := c.git(ctx, a...); err != nil {
			return err
		}
	}
	return nil
}
