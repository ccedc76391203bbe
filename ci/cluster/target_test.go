//go:build clustertest

package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gvisorgen/gvisorgen/internal/layout"
)

// The product's own objects, as generated.
const (
	installerNS = "gvisor-system"
	installerDS = "runsc-installer"
	smokeNS     = "gvisor-smoke"
	smokePod    = "gvisor-smoke"
)

// Test-target paths, in the temp copy of the repository (Cluster.Repo): only the product's own values.
func (c *Cluster) targetFile() string   { return filepath.Join(c.Repo, layout.TargetsDir, "e2e.yaml") }
func (c *Cluster) generatedDir() string { return filepath.Join(c.Repo, layout.GeneratedDir, "e2e") }
func (c *Cluster) smokeDir() string     { return filepath.Join(c.Repo, layout.SmokeDir, "e2e") }
func (c *Cluster) pinsFile() string     { return filepath.Join(c.Repo, layout.CUEDir, "pins.cue") }
func (c *Cluster) daemonSetFile() string {
	return filepath.Join(c.generatedDir(), "daemonset-runsc-installer.yaml")
}

// writeTarget writes the test target: profile kind, the mirror's https baseURL, the imported installer and kubectl
// images by their digests (no registry has them). The sandbox network is on (runsc's default): the current runsc sets
// it up here; only Debian's 2022 runsc (vDeb) cannot, so its target sets runsc network "none".
// No sha512: the pins come from pins.cue, written by gvisorgen pin. The readiness gate is on (the default): its
// label-node container reaches the API server through the kubernetes Service (kube-proxy, node.sh). The installer's
// readiness probe runs every 10 s, not 30 nor 5: README.md, "Only the product's own values", says why.
func (c *Cluster) writeTarget(version, mode string) error {
	y := fmt.Sprintf(`profile: kind
gvisor:
  version: "%s"
  release: {baseURL: %s}
  installer:
    mode: %s
    image: {repository: gvz-e2e/busybox, tag: e2e, digest: "%s", pullPolicy: Never}
    priorityQuota: {create: %t}
    readinessProbe: {periodSeconds: 10}
  readinessGate:
    image: {repository: gvz-e2e/kubectl, tag: e2e, digest: "%s", pullPolicy: Never}
%s%ssmoke:
  image: %s
`, version, mirror, mode, imgDigest, !c.noQuota, kubectlDig, map[bool]string{true: "  runsc:\n    config: {network: \"none\"}\n"}[version == vDeb],
		map[bool]string{true: "  classes:\n" + c.classes}[c.classes != ""], img)
	return os.WriteFile(c.targetFile(), []byte(y), 0o644)
}

// gvisorgen runs the product. pin runs in the node's network namespace, where the mirror listens (the files are the
// machine's: the mount namespace is not entered).
func (c *Cluster) gvisorgen(ctx context.Context, args ...string) (string, error) {
	bin := filepath.Join(work, "gvisorgen")
	if args[0] == "pin" {
		out, err := c.nsenter(ctx, false, bin, args...)
		return string(out), err
	}
	out, err := execOut(ctx, bin, args...)
	return out, err
}

// target is the documented flow at every change of the target: set the values, pin (trusting the test CA), generate.
// It returns pin's output.
func (c *Cluster) target(ctx context.Context, t *testing.T, version, mode string) string {
	t.Helper()
	if err := c.writeTarget(version, mode); err != nil {
		t.Fatal(err)
	}
	pin, err := c.gvisorgen(ctx, "pin", "--root", c.Repo, "--target", "e2e", "--ca-file", filepath.Join(work, "tls/ca.pem"))
	if err != nil {
		t.Fatalf("gvisorgen pin (%s, %s): %v\n%s", version, mode, err, pin)
	}
	c.generated = version + " " + mode
	l := strings.Split(strings.TrimSpace(pin), "\n")
	t.Logf("  .. gvisorgen pin: %s", l[len(l)-1])
	if out, err := c.gvisorgen(ctx, "generate", "--root", c.Repo, "--target", "e2e"); err != nil {
		t.Fatalf("gvisorgen generate (%s, %s): %v\n%s", version, mode, err, out)
	}
	return pin
}

// install makes the node run the given release through the product: target, apply, rollout.
func (c *Cluster) install(ctx context.Context, t *testing.T, version, mode string) {
	t.Helper()
	c.ensureTarget(ctx, t, version, mode)
	c.applyGenerated(ctx, t)
	if err := c.WaitRollout(ctx, t, installRollout); err != nil {
		t.Fatal(err)
	}
	c.installed = version
	if mode == "uninstall" {
		c.installed = ""
	}
}

func (c *Cluster) applyGenerated(ctx context.Context, t *testing.T) {
	t.Helper()
	if err := c.ApplyDir(ctx, c.generatedDir()); err != nil {
		t.Fatalf("apply of the generated folder: %v", err)
	}
}

// published is the sha512 the mirror publishes for an x86_64 artifact of a release.
func (c *Cluster) published(t *testing.T, version, artifact string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.Dir, "serve/release", version, "x86_64", artifact+".sha512"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))[0]
}

// pinnedInDS: the rendered DaemonSet pins x86_64/<artifact> (GVISOR_SHA512_PINS) to sum.
func (c *Cluster) pinnedInDS(t *testing.T, artifact, sum string) bool {
	t.Helper()
	b, err := os.ReadFile(c.daemonSetFile())
	if err != nil {
		t.Fatal(err)
	}
	return regexp.MustCompile(`(?m)^ +x86_64/` + regexp.QuoteMeta(artifact) + ` ` + sum + `$`).Match(b)
}

// stamp reads a key of the installer's stamp (/usr/local/bin/.gvisorgen-runsc.stamp: "key value" lines).
func (c *Cluster) stamp(key string) string {
	b, _ := c.ReadHostFile("/usr/local/bin/.gvisorgen-runsc.stamp")
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, " "); ok && k == key {
			return v
		}
	}
	return ""
}

// The ensure* helpers give a scenario the state the ones before it leave, when it runs alone (go test -run): each is
// a no-op when that state is already there.

// ensureTarget renders the target for version and mode unless that is what the generated folder holds.
func (c *Cluster) ensureTarget(ctx context.Context, t *testing.T, version, mode string) {
	t.Helper()
	if c.generated != version+" "+mode {
		c.target(ctx, t, version, mode)
	}
}

// ensureInstalled installs version through the product unless it is installed; version "" accepts any installed one.
func (c *Cluster) ensureInstalled(ctx context.Context, t *testing.T, version string) {
	t.Helper()
	if c.installed != "" && (version == "" || version == c.installed) {
		return
	}
	if version == "" {
		version = vGood
	}
	c.ensureRunning(ctx, t, runcSleeper)
	c.install(ctx, t, version, "install")
}

// ensureRunning starts a long-running harness pod unless it runs, and records its state.
func (c *Cluster) ensureRunning(ctx context.Context, t *testing.T, s podSpec) {
	t.Helper()
	if _, ok := c.states[s.name]; ok {
		return
	}
	c.runPod(ctx, t, s, "Running")
	c.remember(ctx, t, s.name)
}
