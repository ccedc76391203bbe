//go:build clustertest

package cluster

import (
	"context"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The OCI scenario (Flux 6, make e2e-flux, on the newest containerd of the run): the user's switch from git to the
// signed artifact docs/gitops.md describes. A registry (the Distribution project's v3, a process in the node's
// network namespace, over HTTPS with the test CA) receives what `gvisorgen push` publishes; Flux's own
// source-controller verifies it with cosign (the public key from the committed values) before kustomize-controller
// applies it.
const (
	registryAddr = nodeIP + ":18444"
	ociRepo      = "oci://" + registryAddr + "/gvisor/e2e"
	ociPassword  = "e2e-only"
)

var ociRepoGVR = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "ocirepositories"}

// ociValues: the e2e target delivered from the artifact, verified with pub, the registry's CA in a Secret.
func ociValues(pub string) string {
	return `delivery:
  source: oci
  argocd: {enabled: false}
  flux: {interval: 20s, retryInterval: 10s, timeout: 5m}
  oci:
    url: ` + ociRepo + `
    tag: main
    caSecret: registry-ca
    publicKey: |
` + indent(strings.TrimSpace(pub), "      ") + "\n"
}

// TestFluxOCISignedArtifact: the Kustomization of the git scenarios moves to an OCIRepository: the target committed
// with delivery.source oci and pushed signed, delivery/e2e/ applied (the GitRepository it no longer holds deleted,
// as docs/gitops.md says): Flux verifies and applies it, the installer rolls out, a gVisor pod runs. A bump by a new
// signed push rolls the installer with a gVisor pod running across it. Then the tag moved to an artifact signed with
// another key, and to an unsigned one: each refused by source-controller ("verif…"), the Kustomization keeps the last
// applied digest, the node does not change. A signed push of the same tree brings it back.
func TestFluxOCISignedArtifact(t *testing.T) {
	onNewest(t, func(ctx context.Context, t *testing.T, c *Cluster) {
		ctx, cancel := context.WithTimeout(ctx, 9*time.Minute)
		defer cancel()
		r := c.flux(ctx, t)
		c.ensureRunning(ctx, t, runcSleeper)
		keys := c.cosignKeys(t)
		c.serveRegistry(ctx, t)
		c.ociCASecret(ctx, t)
		first, next := fluxReleases(c.V)
		values := func(y string) string {
			return strings.Replace(y, fluxValues, ociValues(keys.pub), 1)
		}

		// first sync from the signed artifact
		r0 := c.Restarts()
		c.fluxCommit(ctx, t, first, "install", values, "deliver e2e from a signed OCI artifact")
		digest := c.push(ctx, t, "--key", keys.key)
		if err := c.dyn.Resource(gitRepoGVR).Namespace(fluxNS).Delete(ctx, fluxName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("delete the GitRepository: %v", err)
		}
		c.applyOCIDelivery(ctx, t)
		r.source = ociRepoGVR
		c.fluxReconcile(ctx, t, true)
		c.waitFlux(ctx, t, syncRollout, "the signed artifact applied and Ready", appliedReady(digest), nil)
		src, _ := c.fluxGet(ctx, ociRepoGVR)
		t.Logf("  .. OCIRepository Ready=%s %s: %s", src.ready, src.reason, clip(src.message, 200))
		if v := c.stamp("version"); v != first {
			t.Errorf("stamp says version %q, want %s", v, first)
		}
		t.Logf("  .. %d containerd restart(s) since the switch", c.Restarts()-r0)
		c.installed, r.synced = first, first+" oci"
		c.smokePV(ctx, t)
		c.smoke(ctx, t)

		// a version bump by a new signed push, a gVisor pod running across it
		c.ensureRunning(ctx, t, gvisorSleeper)
		c.fluxCommit(ctx, t, next, "install", values, "gVisor "+next+", pushed signed")
		bumped := c.push(ctx, t, "--key", keys.key)
		c.fluxReconcile(ctx, t, true)
		c.waitFlux(ctx, t, syncRollout, "the bump applied and Ready", appliedReady(bumped), nil)
		if v := c.stamp("version"); v != next {
			t.Errorf("stamp says version %q after the bump, want %s", v, next)
		}
		c.installed = next
		c.untouched(ctx, t, gvisorSleeper.name)

		// refused: another key's signature, then no signature; the node stays as it is
		cfg0, _ := c.ReadHostFile("/etc/containerd/config.toml")
		r1 := c.Restarts()
		for _, bad := range []struct {
			what string
			args []string
		}{
			{"signed with another key", []string{"--key", keys.other}},
			{"unsigned", []string{"--unsigned"}},
		} {
			// the same tree under another created time: another digest, as a tampered artifact would have
			d := c.push(ctx, t, append(bad.args, "--revision", "main@sha1:"+strings.Repeat("0", 40), "--created", time.Now().UTC().Format(time.RFC3339))...)
			if d == bumped {
				t.Fatalf("%s: the same digest as the signed artifact", bad.what)
			}
			tok := c.fluxReconcile(ctx, t, true)
			var s fluxStatus
			err := Poll(ctx, 500*time.Millisecond, 2*time.Minute, "source-controller refuses the artifact "+bad.what, func(ctx context.Context) (bool, error) {
				var err error
				s, err = c.fluxGet(ctx, ociRepoGVR)
				return err == nil && s.handled == tok && s.ready == "False", err
			})
			if err != nil {
				t.Fatalf("%v: OCIRepository Ready=%s %s: %s", err, s.ready, s.reason, s.message)
			}
			t.Logf("  .. %s: OCIRepository Ready=False %s: %s", bad.what, s.reason, clip(s.message, 300))
			if !strings.Contains(strings.ToLower(s.reason+" "+s.message), "verif") {
				t.Errorf("%s: the refusal does not say verification: %s: %s", bad.what, s.reason, s.message)
			}
			if ks, _ := c.fluxGet(ctx, ksGVR); !strings.HasSuffix(ks.applied, bumped) {
				t.Errorf("%s: the Kustomization's applied revision moved to %s", bad.what, ks.applied)
			}
		}
		if cfg, _ := c.ReadHostFile("/etc/containerd/config.toml"); string(cfg) != string(cfg0) {
			t.Errorf("config.toml changed while Flux refused the artifacts")
		}
		if n := c.Restarts() - r1; n != 0 {
			t.Errorf("containerd restarted %d times while Flux refused the artifacts", n)
		}
		if v := c.stamp("version"); v != next {
			t.Errorf("stamp says %q, want %s", v, next)
		}
		c.untouched(ctx, t, gvisorSleeper.name)

		// the tree signed again: back to Ready, nothing to apply
		back := c.push(ctx, t, "--key", keys.key)
		if back != bumped {
			t.Errorf("the same commit pushed again: %s, want %s (same inputs, same digest)", back, bumped)
		}
		tok := c.fluxReconcile(ctx, t, true)
		var s fluxStatus
		if err := Poll(ctx, 500*time.Millisecond, 2*time.Minute, "source-controller verifies the artifact again", func(ctx context.Context) (bool, error) {
			var err error
			s, err = c.fluxGet(ctx, ociRepoGVR)
			return err == nil && s.handled == tok && s.ready == "True" && strings.HasSuffix(s.applied, bumped), err
		}); err != nil {
			t.Fatalf("%v: OCIRepository Ready=%s %s: %s (artifact %s)", err, s.ready, s.reason, s.message, s.applied)
		}
		c.waitFlux(ctx, t, 2*time.Minute, "the signed artifact back", appliedReady(bumped), nil)
		if n := c.Restarts() - r1; n != 0 {
			t.Errorf("containerd restarted %d times", n)
		}
	})
}

// onNewest runs f on the newest containerd of the run only (the OCI scenario exercises delivery, not the node).
func onNewest(t *testing.T, f func(ctx context.Context, t *testing.T, c *Cluster)) {
	v := versions[len(versions)-1]
	t.Run("c"+v, func(t *testing.T) {
		c := use(t, v)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
		defer cancel()
		f(ctx, t, c)
	})
}

type cosignKeys struct{ key, pub, other string }

// cosignKeys writes two key pairs in cosign's format (sigstore's encrypted PEM, as cosign generate-key-pair writes).
func (c *Cluster) cosignKeys(t *testing.T) cosignKeys {
	t.Helper()
	d := filepath.Join(c.Dir, "cosign")
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	var k cosignKeys
	for _, name := range []string{"cosign", "other"} {
		priv, pub, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), cryptoutils.StaticPasswordFunc([]byte(ociPassword)))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(d, name+".key")
		if err := os.WriteFile(p, priv, 0o600); err != nil {
			t.Fatal(err)
		}
		if name == "cosign" {
			k.key, k.pub = p, string(pub)
		} else {
			k.other = p
		}
	}
	return k
}

// registryDir is ci/registry/build.sh's cache folder (the registry binary).
func registryDir() (string, error) {
	out, err := exec.Command("sh", filepath.Join(repoRoot, "ci/registry/build.sh"), "--dir").Output()
	if err != nil {
		return "", fmt.Errorf("ci/registry/build.sh --dir: %w", err)
	}
	d := strings.TrimSpace(string(out))
	if !exists(filepath.Join(d, "registry")) {
		return "", fmt.Errorf("%s has no registry: run sh ci/registry/build.sh (make e2e-flux does)", d)
	}
	return d, nil
}

// serveRegistry runs the Distribution project's registry (distribution/distribution v3, ci/registry/build.sh) over
// HTTPS with the mirror's certificate (issued by the test CA for the node's IP) on registryAddr of the node's
// network namespace, its storage on disk, once per cluster; it dies with the node, like the controllers.
func (c *Cluster) serveRegistry(ctx context.Context, t *testing.T) {
	t.Helper()
	if c.registry {
		return
	}
	dir, err := registryDir()
	if err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(c.Dir, "registry")
	if err := os.MkdirAll(filepath.Join(d, "storage"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`version: 0.1
log:
  level: info
  formatter: text
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
  tls:
    certificate: %s
    key: %s
`, filepath.Join(d, "storage"), registryAddr, filepath.Join(work, "tls/mirror.pem"), filepath.Join(work, "tls/mirror.key"))
	if err := os.WriteFile(filepath.Join(d, "config.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-t", fmt.Sprint(c.pid), "-n", "-p", "--", filepath.Join(dir, "registry"), "serve", filepath.Join(d, "config.yml")}
	if err := c.startInNode("registry", args); err != nil {
		t.Fatal(err)
	}
	// Ready when /v2/ answers over TLS that the test CA verifies.
	ca, err := os.ReadFile(filepath.Join(work, "tls/ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	err = c.waitURL(ctx, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, "https://"+registryAddr+"/v2/", 60*time.Second)
	if err != nil {
		log, _ := tailFile(filepath.Join(c.Dir, "run/logs/registry.log"), 20)
		t.Fatalf("registry not ready on %s: %v\n%s", registryAddr, err, log)
	}
	c.registry = true
}

// ociCASecret gives source-controller the test CA (delivery.oci.caSecret).
func (c *Cluster) ociCASecret(ctx context.Context, t *testing.T) {
	t.Helper()
	d := filepath.Join(c.Dir, "oci-ca")
	os.MkdirAll(d, 0o755)
	ca, err := os.ReadFile(filepath.Join(work, "tls/ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	y := "apiVersion: v1\nkind: Secret\nmetadata: {name: registry-ca, namespace: " + fluxNS + "}\nstringData:\n  ca.crt: |\n" +
		indent(strings.TrimSpace(string(ca)), "    ") + "\n"
	if err := os.WriteFile(filepath.Join(d, "secret.yaml"), []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyDir(ctx, d); err != nil {
		t.Fatalf("registry CA secret: %v", err)
	}
}

// push runs `gvisorgen push` as a user would, from the node's network namespace (where the registry listens), and
// returns the digest it printed (its last line).
func (c *Cluster) push(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	full := append([]string{"-t", fmt.Sprint(c.pid), "-n", "--", filepath.Join(work, "gvisorgen"), "push", "--root", c.Repo,
		"--target", "e2e", ociRepo + ":main", "--ca-file", filepath.Join(work, "tls/ca.pem")}, args...)
	cmd := exec.CommandContext(ctx, "nsenter", full...)
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD="+ociPassword, "DOCKER_CONFIG="+filepath.Join(c.Dir, "docker"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gvisorgen push %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	d := lines[len(lines)-1]
	if !strings.HasPrefix(d, "sha256:") {
		t.Fatalf("gvisorgen push printed no digest last:\n%s", out)
	}
	t.Logf("  .. gvisorgen push %s: %s", strings.Join(args, " "), clip(strings.Join(lines[:len(lines)-1], "; "), 300))
	return d
}

// applyOCIDelivery applies delivery/e2e/ as generated for the OCI source: the key's Secret, the OCIRepository and
// the Kustomization, nothing else.
func (c *Cluster) applyOCIDelivery(ctx context.Context, t *testing.T) {
	t.Helper()
	d := filepath.Join(c.Repo, "delivery/e2e")
	files, _ := filepath.Glob(filepath.Join(d, "*"))
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	if want := "kustomization-gvisor-e2e.yaml ocirepository-gvisor-e2e.yaml secret-gvisor-e2e-cosign.yaml"; strings.Join(names, " ") != want {
		t.Fatalf("delivery/e2e/ holds %v, want %s", names, want)
	}
	if err := c.ApplyDir(ctx, d); err != nil {
		t.Fatalf("apply of delivery/e2e/: %v", err)
	}
	t.Logf("  .. applied delivery/e2e/ (OCIRepository, its cosign key's Secret, the Kustomization on it)")
}
