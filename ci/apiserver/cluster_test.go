//go:build apiserver

// Package apiserver runs the generated manifests against a real kube-apiserver
// and etcd (built from Go modules by ci/k8s/build.sh) and measures how closely
// `gvisorgen vet --manifests` agrees with the server.
//
// Run it with `sh ci/apiserver/test.sh` (after `sh ci/k8s/build.sh`); the
// binaries are found through GVISORGEN_K8S_BIN. A missing binary fails the
// run: it is never a skip.
package apiserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binEnv names the folder that holds the binaries built by ci/k8s/build.sh.
const binEnv = "GVISORGEN_K8S_BIN"

// cluster is a running etcd + kube-apiserver pair and a kubectl set up to
// reach it with an admin token.
type cluster struct {
	bin    string // folder with etcd, kube-apiserver, kubectl
	dir    string // scratch folder of this run
	server string // https://127.0.0.1:PORT
	token  string
	// kubeletToken authenticates as node A's kubelet (system:node:gvz-node-a,
	// group system:nodes), for the Node authorizer and NodeRestriction.
	kubeletToken string
	kubeconfig   string
	http         *http.Client
	apiLog       string
}

// binaries returns the folder of the cached binaries and fails the test when
// any of them is missing.
func binaries(t testing.TB, names ...string) string {
	t.Helper()
	dir := os.Getenv(binEnv)
	if dir == "" {
		t.Fatalf("%s is not set: run `sh ci/k8s/build.sh && sh ci/apiserver/test.sh` (make e2e)", binEnv)
	}
	for _, n := range names {
		p := filepath.Join(dir, n)
		st, err := os.Stat(p)
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			t.Fatalf("missing binary %s (%v): run `sh ci/k8s/build.sh` first", p, err)
		}
	}
	return dir
}

// freePort asks the kernel for a free port on the loopback address.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Every process this package starts is registered here, so that an interrupt
// (SIGINT/SIGTERM) stops them before the test binary exits. Pdeathsig covers
// the case where the test binary dies without running any cleanup (a panic, a
// -timeout, SIGKILL).
var (
	procMu    sync.Mutex
	procs     = map[int]string{} // process group id -> name
	scratch   []string           // folders to remove on an interrupt
	watchOnce sync.Once
)

// tempDir is t.TempDir, also removed when the run is interrupted.
func tempDir(t testing.TB) string {
	d := t.TempDir()
	procMu.Lock()
	scratch = append(scratch, filepath.Dir(d))
	procMu.Unlock()
	return d
}

func watchSignals() {
	watchOnce.Do(func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
		go func() {
			s := <-ch
			procMu.Lock()
			for pgid, name := range procs {
				fmt.Fprintf(os.Stderr, "apiserver: %v: stopping %s (pgid %d)\n", s, name, pgid)
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
			}
			time.Sleep(200 * time.Millisecond) // let the killed processes release their files
			for _, d := range scratch {
				_ = os.RemoveAll(d)
			}
			procMu.Unlock()
			os.Exit(130)
		}()
	})
}

// startProcess starts bin in its own process group with its output in
// logPath, and stops the whole group when the test ends.
func startProcess(t testing.TB, name, logPath, bin string, args ...string) <-chan error {
	t.Helper()
	watchSignals()
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	pgid := cmd.Process.Pid
	procMu.Lock()
	procs[pgid] = name
	procMu.Unlock()
	exited := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		err := cmd.Wait()
		exited <- err
		close(done)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Logf("%s did not stop on SIGTERM within 15s: SIGKILL", name)
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-done
		}
		// Anything left in the group (there should be nothing) goes too.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		procMu.Lock()
		delete(procs, pgid)
		procMu.Unlock()
		logf.Close()
	})
	return exited
}

// tail returns the last n lines of a log file, for failure messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// startCluster starts etcd and kube-apiserver on free loopback ports and waits
// for /readyz. Both are stopped when t ends.
func startCluster(t testing.TB) *cluster {
	t.Helper()
	bin := binaries(t, "etcd", "kube-apiserver", "kubectl")
	dir := tempDir(t)
	c := &cluster{bin: bin, dir: dir}
	start := time.Now()

	// etcd
	clientPort, peerPort := freePort(t), freePort(t)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	etcdLog := filepath.Join(dir, "etcd.log")
	etcdExit := startProcess(t, "etcd", etcdLog, filepath.Join(bin, "etcd"),
		"--name=e2e",
		"--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=e2e="+peerURL,
		"--initial-cluster-state=new",
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	)

	// kube-apiserver credentials: an admin token and a service account key.
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		t.Fatal(err)
	}
	c.token = hex.EncodeToString(tok)
	if _, err := rand.Read(tok); err != nil {
		t.Fatal(err)
	}
	c.kubeletToken = hex.EncodeToString(tok)
	tokenFile := filepath.Join(dir, "tokens.csv")
	writeFile(t, tokenFile, c.token+",e2e-admin,e2e-admin,system:masters\n"+
		c.kubeletToken+",system:node:"+nodeA+",kubelet-"+nodeA+",system:nodes\n")
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	saKey := filepath.Join(dir, "sa.key")
	writeFile(t, saKey, string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})))

	apiPort := freePort(t)
	c.server = fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	c.apiLog = filepath.Join(dir, "kube-apiserver.log")
	apiExit := startProcess(t, "kube-apiserver", c.apiLog, filepath.Join(bin, "kube-apiserver"),
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", apiPort),
		"--cert-dir="+filepath.Join(dir, "certs"),
		"--token-auth-file="+tokenFile,
		// The readiness gate's cases need the kubelet's own rules: the Node
		// authorizer and NodeRestriction (gate_test.go).
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+saKey,
		"--service-account-signing-key-file="+saKey,
		"--service-cluster-ip-range=10.96.0.0/16",
		"--allow-privileged=true",
		"--endpoint-reconciler-type=none",
		"--profiling=false",
		"--v=1",
	)

	c.http = &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, // loopback, self-signed
	}
	deadline := time.Now().Add(2 * time.Minute)
	var last string
	for {
		select {
		case err := <-etcdExit:
			t.Fatalf("etcd exited before the apiserver was ready: %v\n%s", err, tail(etcdLog, 30))
		case err := <-apiExit:
			t.Fatalf("kube-apiserver exited before it was ready: %v\n%s", err, tail(c.apiLog, 40))
		default:
		}
		code, body, err := c.get("/readyz")
		if err == nil && code == http.StatusOK {
			break
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("HTTP %d: %s", code, body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube-apiserver not ready after 2m: %s\n--- kube-apiserver.log\n%s\n--- etcd.log\n%s",
				last, tail(c.apiLog, 40), tail(etcdLog, 20))
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("etcd + kube-apiserver ready at %s in %s", c.server, time.Since(start).Round(100*time.Millisecond))

	c.kubeconfig = filepath.Join(dir, "kubeconfig")
	writeFile(t, c.kubeconfig, fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: e2e-admin
  user:
    token: %s
contexts:
- name: e2e
  context:
    cluster: e2e
    user: e2e-admin
current-context: e2e
`, c.server, c.token))
	if out, err := c.kubectl(context.Background(), "version"); err != nil {
		t.Fatalf("kubectl version: %v\n%s", err, out)
	} else {
		t.Logf("kubectl version:\n%s", strings.TrimSpace(out))
	}
	return c
}

func writeFile(t testing.TB, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// get does an authenticated GET on the apiserver.
func (c *cluster) get(path string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, c.server+path, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.String(), nil
}

// kubectl runs the built kubectl against the cluster and returns its combined
// output.
func (c *cluster) kubectl(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	full := append([]string{"--kubeconfig=" + c.kubeconfig, "--cache-dir=" + filepath.Join(c.dir, "kube-cache")}, args...)
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, "kubectl"), full...)
	cmd.Env = append(os.Environ(), "HOME="+c.dir, "KUBECONFIG="+c.kubeconfig)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// fieldManager is the server-side apply manager of every apply in this suite.
const fieldManager = "gvisorgen-e2e"

// apply applies one file for real (server-side).
func (c *cluster) apply(ctx context.Context, file string) (string, error) {
	return c.kubectl(ctx, "apply", "--server-side", "--field-manager="+fieldManager,
		"--force-conflicts", "--validate=strict", "-f", file)
}

// dryRun applies one file with a server-side dry run and strict field
// validation: the server runs defaulting, validation and admission but stores
// nothing.
func (c *cluster) dryRun(ctx context.Context, file string) (string, error) {
	return c.kubectl(ctx, "apply", "--server-side", "--dry-run=server", "--field-manager="+fieldManager,
		"--force-conflicts", "--validate=strict", "-f", file)
}

// repoRoot is the project's root folder (two levels up from this package).
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !strings.Contains(string(b), "module github.com/gvisorgen/gvisorgen\n") {
		t.Fatalf("%s is not the gvisorgen repo root (%v)", root, err)
	}
	return root
}
