//go:build clustertest

package cluster

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The releases the mirror serves (ci/cluster/prepare.sh): binaries layout, archive layout, and a tampered runsc beside
// the genuine .sha512.
const (
	vGood = "20240212"
	vUp   = "20260801"
	vBad  = "20240213"
	vDeb  = "20221219" // Debian's runsc 20221219 and the 2022 shim: the upgrade's starting point (network "none")

	nodeName = "gvz-node" // node.sh's single node (its kubelet's system:node:gvz-node)
	nodeIP   = "10.99.0.1"
	mirror   = "https://" + nodeIP + ":18443/release"
	img      = "docker.io/gvz-e2e/busybox:e2e"
	// the readiness gate's kubectl image (prepare.sh: the static kubectl of ci/k8s/build.sh as /bin/kubectl)
	kubectlImg = "docker.io/gvz-e2e/kubectl:e2e"
)

// Global fixture, set in TestMain.
var (
	repoRoot   string   // the repository
	work       string   // the scratch folder prepare.sh filled (GVZ_CLUSTER_WORK, or a temp folder)
	versions   []string // containerd versions to run: "16", "17", "24" (GVZ_CLUSTER_VERSIONS)
	keep       bool     // KEEP=1: leave the clusters running and the scratch folder in place
	imgDigest  string   // the installer image's manifest digest (sha256:…)
	kubectlDig string   // the kubectl image's manifest digest
	hostBefore string   // the machine's files before any node started (hostManifest)

	clustersMu sync.Mutex
	clusters   = map[string]*Cluster{}

	summaryMu sync.Mutex
	summary   []string // "c<V> PASS|FAIL <test> <time>", in the order the tests ended
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if f := flag.Lookup("test.list"); f != nil && f.Value.String() != "" {
		return m.Run() // go test -list: no cluster needed
	}
	t0 := time.Now()
	root, err := filepath.Abs("../..")
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster-e2e:", err)
		return 2
	}
	repoRoot = root
	versions = strings.Fields(os.Getenv("GVZ_CLUSTER_VERSIONS"))
	if len(versions) == 0 {
		versions = []string{"16", "17", "24"}
	}
	keep = os.Getenv("KEEP") != ""
	// The machine's files first: nothing may have started yet.
	hostBefore = hostManifest()
	work = os.Getenv("GVZ_CLUSTER_WORK")
	if work == "" {
		// go test run directly: prepare here (make e2e-cluster prepares before the test, see e2e.sh)
		if work, err = os.MkdirTemp("", "gvz-cluster."); err == nil {
			cmd := exec.Command("bash", filepath.Join(repoRoot, "ci/cluster/prepare.sh"), work)
			// the nodes of these versions only
			cmd.Env = append(os.Environ(), "GVZ_CLUSTER_VERSIONS="+strings.Join(versions, " "))
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			err = cmd.Run()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "cluster-e2e: prepare:", err)
			return 2
		}
	}
	if imgDigest, err = imageDigest(img); err == nil {
		kubectlDig, err = imageDigest(kubectlImg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster-e2e:", err)
		return 2
	}

	// Ctrl-C or TERM: the nodes live in their own session (setsid), so stop them here.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sig
		fmt.Fprintf(os.Stderr, "cluster-e2e: %v: stopping the clusters\n", s)
		stopAll()
		fmt.Fprintf(os.Stderr, "cluster-e2e: scratch folder and logs kept in %s\n", work)
		os.Exit(130)
	}()

	code := m.Run()
	// per version, in the order the scenarios ran (go test -v prints them per test)
	sort.SliceStable(summary, func(i, j int) bool { return summary[i][:3] < summary[j][:3] })
	fmt.Fprintf(os.Stderr, "cluster-e2e: summary (containerd, result, test, time):\n  %s\n", strings.Join(summary, "\n  "))
	if keep {
		printKept()
	} else if err := stopAll(); err != nil {
		fmt.Fprintln(os.Stderr, "cluster-e2e:", err)
		code = 1
	}
	if code == 0 && !keep {
		os.RemoveAll(work)
	} else {
		fmt.Fprintf(os.Stderr, "cluster-e2e: scratch folder and logs kept in %s\n", work)
	}
	fmt.Fprintf(os.Stderr, "cluster-e2e: total %.1fs\n", time.Since(t0).Seconds())
	return code
}

// imageDigest reads a reference's manifest digest from images/digests ("REF DIGEST" lines, prepare.sh).
func imageDigest(ref string) (string, error) {
	f, err := os.Open(filepath.Join(work, "images/digests"))
	if err != nil {
		return "", fmt.Errorf("image digests: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if r, d, ok := strings.Cut(s.Text(), " "); ok && r == ref {
			return d, nil
		}
	}
	return "", fmt.Errorf("no digest for %s in %s", ref, f.Name())
}

// stopAll stops every cluster started (idempotent); the error names cgroups left behind.
func stopAll() error {
	clustersMu.Lock()
	defer clustersMu.Unlock()
	var errs []string
	for _, c := range clusters {
		if err := c.stop(); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// printKept says how to reach the clusters KEEP=1 left running, and how to stop them.
func printKept() {
	clustersMu.Lock()
	defer clustersMu.Unlock()
	for _, v := range versions {
		c := clusters[v]
		if c == nil || c.pid == 0 {
			continue
		}
		fmt.Fprintf(os.Stderr, "cluster-e2e: KEEP: containerd %s's cluster runs (node PID 1: %d):\n"+
			"  nsenter -t %d -n -- %s/kubectl --kubeconfig %s/conf/admin.kubeconfig get pods -A\n",
			v, c.pid, c.pid, c.env["GVZ_K8S"], c.Dir)
	}
	fmt.Fprintf(os.Stderr, "cluster-e2e: KEEP: stop them with: sh ci/cluster/down.sh %s\n", work)
}
