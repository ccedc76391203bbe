//go:build clustertest

package cluster

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestPinNeedsTheTestCAAndPinsPublishedDigests (scenario 0): without --ca-file, gvisorgen pin exits 2 naming the
// certificate (the test CA is really needed) and leaves pins.cue as it was; with it, every artifact of 20240212
// (x86_64 and aarch64) is pinned to the digest the mirror publishes, the imported installer image is not asked for
// (the target sets its digest), and the rendered DaemonSet carries the pins and runs the image by its digest.
func TestPinNeedsTheTestCAAndPinsPublishedDigests(t *testing.T) {
	forEachVersion(t, func(ctx context.Context, t *testing.T, c *Cluster) {
		if err := c.writeTarget(vGood, "install"); err != nil {
			t.Fatal(err)
		}
		before, err := os.ReadFile(c.pinsFile())
		if err != nil {
			t.Fatal(err)
		}
		out, err := c.gvisorgen(ctx, "pin", "--root", c.Repo, "--target", "e2e")
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("gvisorgen pin without --ca-file: %v, want exit 2:\n%s", err, out)
		}
		t.Logf("  .. pin without --ca-file: exit %d: %s", ee.ExitCode(), regexp.MustCompile(`x509: .*`).FindString(out))
		if ee.ExitCode() != 2 {
			t.Errorf("gvisorgen pin without --ca-file: exit %d, want 2:\n%s", ee.ExitCode(), out)
		}
		if !strings.Contains(out, "certificate") {
			t.Errorf("gvisorgen pin without --ca-file does not name the certificate:\n%s", out)
		}
		if after, _ := os.ReadFile(c.pinsFile()); !bytes.Equal(before, after) {
			t.Errorf("gvisorgen pin without --ca-file changed pins.cue")
		}

		pin := c.target(ctx, t, vGood, "install")
		for _, l := range strings.Split(strings.TrimSpace(pin), "\n") {
			t.Logf("    %s", l)
		}
		pins, _ := os.ReadFile(c.pinsFile())
		for _, a := range []string{"runsc", "containerd-shim-runsc-v1"} {
			sum := c.published(t, vGood, a)
			if n := strings.Count(string(pins), `"`+sum+`"`); n != 2 {
				t.Errorf("pins.cue pins %s to the published %s %d times, want 2 (x86_64 and aarch64)", a, sum, n)
			}
			if !c.pinnedInDS(t, a, sum) {
				t.Errorf("the rendered DaemonSet does not pin x86_64/%s to %s", a, sum)
			}
		}
		if !regexp.MustCompile(`(?m)^not asked gvz-e2e/busybox:e2e@` + regexp.QuoteMeta(imgDigest) + ` `).MatchString(pin) {
			t.Errorf("pin did not leave the imported image alone (no 'not asked gvz-e2e/busybox:e2e@%s')", imgDigest)
		}
		ds, _ := os.ReadFile(c.daemonSetFile())
		if !regexp.MustCompile(`(?m)image: gvz-e2e/busybox:e2e@` + regexp.QuoteMeta(imgDigest) + `$`).Match(ds) {
			t.Errorf("the DaemonSet does not run the installer by its digest %s", imgDigest)
		}
		c.generated = vGood + " install"
	})
}
