//go:build apiserver

package apiserver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gvisorgen/gvisorgen/internal/eval"
	"github.com/gvisorgen/gvisorgen/internal/gen"
)

// A target with checked sandbox classes (a GPU class and a KVM class): its objects pass the API server (three
// RuntimeClasses, the installer's four init containers, two admission policies), and the Events its installer reports
// about its node are what the node-events policy lets through, and nothing else: the installer's own List (written by
// classes.sh's gvz_gate_events, created by kubectl as report-checked-classes runs it) about its own node, in
// "default", shown by `kubectl describe node`; never about another node, in another namespace, with another reason or
// from a token bound to no pod.

const classesValues = `gvisor:
  classes:
    gvisor-gpu:
      preset: nvidia-gpu
    fast:
      handler: runsc-fast
      runsc:
        config:
          platform: kvm
`

// classesTree renders the kind target with classesValues in process and writes its generated files to a folder.
func classesTree(t *testing.T, root string) string {
	t.Helper()
	out, err := gen.Build(eval.Options{Root: root, Only: []string{"kind"}, ValuesFiles: []string{"-"}, Stdin: []byte(classesValues)})
	if err != nil {
		t.Fatalf("rendering a target with classes: %v", err)
	}
	dir := filepath.Join(tempDir(t), "classes")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range out.Files {
		if strings.HasPrefix(f.Path, "generated/kind/") {
			writeFile(t, filepath.Join(dir, filepath.Base(f.Path)), string(f.Data))
			n++
		}
	}
	if n == 0 {
		t.Fatal("the classes target rendered no generated/kind/ files")
	}
	return dir
}

// installerEvents runs the installer's own gvz_gate_events (cue/installer/classes.sh) for a node and a gates file.
func installerEvents(t *testing.T, root, node, gates string) string {
	t.Helper()
	dir := tempDir(t)
	g := filepath.Join(dir, "gates")
	writeFile(t, g, gates)
	// busybox's sh and awk, as on the node (ci/node/setup.sh installs busybox-static); the host's sh otherwise
	shell := []string{"sh"}
	if bb, err := exec.LookPath("busybox"); err == nil {
		shell = []string{bb, "sh"}
	} else {
		t.Logf("no busybox on PATH: gvz_gate_events runs under the host's sh and awk")
	}
	cmd := exec.Command(shell[0], append(shell[1:], "-c", `set -eu; . "$GVISORGEN_SCRIPTS/lib.sh"; . "$GVISORGEN_SCRIPTS/classes.sh"; gvz_gate_events "$1"`, "sh", g)...)
	cmd.Env = append(os.Environ(), "GVISORGEN_SCRIPTS="+filepath.Join(root, "cue", "installer"), "NODE_NAME="+node, "GVISOR_VERSION=20260810.0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("gvz_gate_events: %v", err)
	}
	p := filepath.Join(dir, "gvisorgen-events.json")
	writeFile(t, p, string(out))
	return p
}

func testClassEvents(t *testing.T, c *cluster, root string) {
	ctx := context.Background()
	dir := classesTree(t, root)
	// Every object of the target, dry run (the namespace for real first).
	files := manifestFiles(t, dir)
	ensureNamespaces(t, c, files)
	dryRunAll(t, c, root, files)

	const (
		evPolicy  = "validatingadmissionpolicy-gvisorgen-runsc-installer-node-events.yaml"
		evBinding = "validatingadmissionpolicybinding-gvisorgen-runsc-installer-node-events.yaml"
		nodeC     = "gvz-node-gpu"
	)
	for _, f := range []string{ns, sa, evPolicy, evBinding, gateRole, gateGrant} {
		if out, err := c.apply(ctx, filepath.Join(dir, f)); err != nil {
			t.Fatalf("apply %s: %v\n%s", f, err, out)
		}
	}
	admin := c.gateClient(t, c.token)
	for _, n := range []string{nodeC, nodeB} {
		if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create node %s: %v", n, err)
		}
	}
	pod := installerPod(ctx, t, admin, "runsc-installer-gpu", nodeC)
	kc := c.tokenKubeconfig(t, "installer-gpu", installerToken(ctx, t, admin, podRef(pod)))
	kcPlain := c.tokenKubeconfig(t, "installer-plain", installerToken(ctx, t, admin, nil))

	gates := "runsc-gvisor-gpu node-restriction.kubernetes.io/gvisor-runsc-gvisor-gpu closed the node's NVIDIA driver 570.86.15 is not one that gVisor 20260810.0 supports (runsc nvproxy list-supported-drivers: 25 versions, 535.129.03 to 620.06.00)\n" +
		"runsc-fast node-restriction.kubernetes.io/gvisor-runsc-fast open kvm\n"
	own := installerEvents(t, root, nodeC, gates)
	other := installerEvents(t, root, nodeB, gates)
	// The closed class's Event alone, with one field changed (one item: a refused List creates none of it).
	closed := installerEvents(t, root, nodeC, strings.SplitAfter(gates, "\n")[0])
	variant := func(name string, fromTo ...string) string {
		b, err := os.ReadFile(closed)
		if err != nil {
			t.Fatal(err)
		}
		y := string(b)
		for i := 0; i < len(fromTo); i += 2 {
			if !strings.Contains(y, fromTo[i]) {
				t.Fatalf("the installer's Events hold no %q", fromTo[i])
			}
			y = strings.ReplaceAll(y, fromTo[i], fromTo[i+1])
		}
		p := filepath.Join(filepath.Dir(closed), name+".json")
		writeFile(t, p, y)
		return p
	}
	otherReason := variant("reason", `"reason":"SandboxClassClosed"`, `"reason":"NodeNotReady"`)
	otherSource := variant("source", `"component":"gvisorgen-runsc-installer"`, `"component":"kubelet"`)
	// An Event about a pod of the installer's namespace, there: valid to the API server, not to the policy.
	inNS := variant("namespace", `"involvedObject":{"apiVersion":"v1","kind":"Node","name":"`+nodeC+`","uid":"`+nodeC+`"}`,
		`"involvedObject":{"apiVersion":"v1","kind":"Pod","namespace":"`+installerNS+`","name":"`+pod.Name+`"}`,
		`"namespace":"default"`, `"namespace":"`+installerNS+`"`)
	// About another kind of object, with the node's name, in default: only the Node kind passes.
	notNode := variant("kind", `"kind":"Node"`, `"kind":"Pod"`)

	// The policy is enforced once the server has loaded it (bounded wait, as for the gate).
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, code := c.kubectlAs(kc, "create", "--dry-run=server", "-f", other)
		if code != 0 && strings.Contains(out, "ValidatingAdmissionPolicy") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node-events policy denies nothing after 30 s (last: %s)", out)
		}
		time.Sleep(200 * time.Millisecond)
	}

	for _, ec := range []struct {
		name, kubeconfig, file string
		allow                  bool
		says                   string
	}{
		{"own node: the installer's Events (report-checked-classes' kubectl, as rendered)", kc, own, true, ""},
		{"another node", kc, other, false, "the runsc installer of node " + nodeC + " may report only about that Node"},
		{"another reason", kc, otherReason, false, "have the reason SandboxClassOpen or SandboxClassClosed"},
		{"another source", kc, otherSource, false, "have the reason SandboxClassOpen or SandboxClassClosed and the source"},
		{"the installer's namespace, about its pod", kc, inNS, false, "may only create Events, in the namespace default"},
		{"about a Pod named like its node, in default", kc, notNode, false, "may report only about that Node"},
		{"token without a node claim", kcPlain, own, false, "token names no node"},
	} {
		out, code := c.kubectlAs(ec.kubeconfig, "create", "-f", ec.file)
		switch {
		case (code == 0) != ec.allow:
			t.Errorf("%s: exit %d, want allowed=%v: %s", ec.name, code, ec.allow, out)
		case !ec.allow && !strings.Contains(out, ec.says):
			t.Errorf("%s: the server does not say %q: %s", ec.name, ec.says, out)
		default:
			t.Logf("%s: %s", ec.name, firstLine(out, 220))
		}
	}
	// No other verb: RBAC grants create only.
	evs, err := admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + nodeC})
	if err != nil || len(evs.Items) != 2 {
		t.Fatalf("Events about %s: %v (%v), want the installer's 2", nodeC, evs, err)
	}
	if out, code := c.kubectlAs(kc, "-n", "default", "delete", "event", evs.Items[0].Name); code == 0 || !strings.Contains(out, `cannot delete resource "events"`) {
		t.Errorf("the installer deleted an Event (exit %d): %s", code, out)
	}
	// What a person sees: `kubectl describe node` lists both, the closed class with both versions.
	desc, err := c.kubectl(ctx, "describe", "node", nodeC)
	if err != nil {
		t.Fatalf("describe node: %v\n%s", err, desc)
	}
	for _, want := range []string{"SandboxClassClosed", "SandboxClassOpen", "gvisorgen-runsc-installer", "the node's NVIDIA driver 570.86.15 is not one that gVisor 20260810.0 supports"} {
		if !strings.Contains(desc, want) {
			t.Errorf("kubectl describe node %s does not show %q:\n%s", nodeC, want, desc)
		}
	}
	fmt.Fprintf(os.Stderr, "node-events: %d Events about %s, shown by describe node\n", len(evs.Items), nodeC)
}
