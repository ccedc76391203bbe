//go:build nodetest

package node

import (
	"strings"
	"testing"
)

// TestArchiveWithoutSentrySidecar: an archive release whose gvisor-bin/ lacks gvisor_sentry (the fixture's archives
// ship other helpers only). runsc would boot every sandbox with itself, a fallback it deprecates: the installer
// installs it with a WARNING line. With sidecar-usage-policy = "STRICT" in runsc.toml (gvisor.runsc.config) runsc
// refuses to boot such a sandbox, so the installer refuses the release before installing anything.
func TestArchiveWithoutSentrySidecar(t *testing.T) {
	t.Parallel()
	t.Run("strict-refused", func(t *testing.T) {
		h := newHost(t, "24")
		r := h.refused(map[string]string{"GVISOR_VERSION": tagArch, "RUNSC_CONFIG_TOML": `sidecar-usage-policy = "STRICT"`},
			`gvisor\.tar\.bz2 has no gvisor-bin/gvisor_sentry, and runsc\.toml sets sidecar-usage-policy = STRICT: .*nothing was installed`)
		if strings.Contains(r.Output, "installed gVisor") {
			t.Fatalf("refused, yet says it installed: %s", r)
		}
	})
	t.Run("default-warns-and-installs", func(t *testing.T) {
		h := newHost(t, "24")
		r := h.mustRun("install-runsc.sh", map[string]string{"GVISOR_VERSION": tagArch})
		if !strings.Contains(r.Output, "WARNING: gvisor.tar.bz2 has no gvisor-bin/gvisor_sentry: runsc will boot sandboxes with itself") {
			t.Fatalf("no warning about the missing sidecar: %s", r)
		}
		h.assertInstalled("/usr/local/bin", tagArch, archFiles...)
	})
}
