//go:build nodetest

package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/template"
)

// A k3s (and RKE2) agent node, simulated: containerd 2.2.9 for k3s (k3s bundles the 2.2 line in 2026, v2.2.x-k3s) and
// 2.3.4 for RKE2 (which bundles v2.3.4-k3s) runs as unit k3s-agent (rke2-agent)
// with k3s's config, which the unit renders anew from k3s's template at every start (the fake systemctl's "render"
// knob: an edit in place is lost at the next restart), on k3s's socket. The config is k3s's own v3 template
// (testdata/k3s-config-v3.toml.tmpl, a copy: k3s's module is not served here) rendered with text/template for one node,
// with the drop-in import k3s's template has from about March 2026 (k3s PR #13680) or without it (older k3s). The
// installer runs with the k3s profile's values (cue/profiles.cue: #ProfileFacts.k3s.node).

// k3sSock: k3s's and RKE2's containerd socket (rke2 pkg/executor/staticpod: ContainerdSock).
const k3sSock = "/run/k3s/containerd/containerd.sock"

// distro: k3s or RKE2 (whose agent is k3s's: the same template and layout under its own folder, its own units).
type distro struct {
	name, unit, services string
	ctrd                 string // the containerd of the suite that stands in for the one it bundles
}

func (d distro) dir() string    { return "/var/lib/rancher/" + d.name + "/agent/etc/containerd" }
func (d distro) config() string { return d.dir() + "/config.toml" }
func (d distro) dropIn() string { return d.dir() + "/config-v3.toml.d/gvisorgen-runsc.toml" }

var distros = []distro{{"k3s", "k3s-agent", "k3s k3s-agent", "22"}, {"rke2", "rke2-agent", "rke2-server rke2-agent", "23"}}

// renderK3s renders k3s's v3 template for one agent node, importing config-v3.toml.d when withImport.
func renderK3s(t *testing.T, d distro, withImport bool) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "k3s-config-v3.toml.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	if withImport {
		src = strings.Replace(src, "__CONTAINERD_IMPORTS_PATH__", d.dir()+"/config-v3.toml.d/*.toml", 1)
	} else {
		src = strings.Replace(src, "imports = [\"__CONTAINERD_IMPORTS_PATH__\"]\n", "", 1)
	}
	tmpl, err := template.New("k3s").Funcs(template.FuncMap{
		"deschemify": func(s string) string { return strings.TrimPrefix(s, "unix://") },
	}).Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	data := map[string]any{
		"Program": d.name,
		"NodeConfig": map[string]any{
			"Containerd": map[string]any{
				"Root": "/var/lib/rancher/" + d.name + "/agent/containerd", "State": "/run/k3s/containerd",
				"Address": "unix://" + k3sSock, "Opt": "/var/lib/rancher/" + d.name + "/agent/containerd",
				"Registry": d.dir() + "/certs.d", "BlockIOConfig": "", "RDTConfig": "",
			},
			"SELinux": false,
			"AgentConfig": map[string]any{
				"Snapshotter": "overlayfs", "PauseImage": "rancher/mirrored-pause:3.6",
				"CNIBinDir": "/var/lib/rancher/" + d.name + "/data/current/bin", "CNIConfDir": "/var/lib/rancher/" + d.name + "/agent/etc/cni/net.d",
				"ImageServiceSocket": "",
			},
			"DefaultRuntime": "",
		},
		"EnableUnprivileged": true, "NonrootDevices": false, "DisableCgroup": false, "IsRunningInUserNS": false,
		"SystemdCgroup": true, "ExtraRuntimes": map[string]any{}, "PrivateRegistryConfig": nil,
	}
	var out strings.Builder
	if err := tmpl.Execute(&out, data); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// newK3sHost: a k3s (RKE2) agent node running, with the profile's installer values.
func newK3sHost(t *testing.T, d distro, withImport bool) (*Host, string) {
	t.Helper()
	h := newHost(t, d.ctrd)
	h.Unit, h.Sock = d.unit, k3sSock
	for _, dir := range []string{d.dir(), "/run/k3s/containerd"} {
		if err := os.MkdirAll(h.P(dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	rendered := renderK3s(t, d, withImport)
	h.knob("unit", d.unit)
	h.knob("config-file", d.config())
	h.knob("sock", k3sSock)
	h.knob("render", rendered)
	h.link(crictlBin, h.Dir+"/fakebin/crictl")
	for k, v := range map[string]string{
		"CONTAINERD_CONFIG":      d.config(),
		"RUNSC_CONFIG":           d.dir() + "/runsc/runsc.toml",
		"CONTAINERD_CONFIG_MODE": "dropin",
		"CONTAINERD_SERVICE":     d.services,
		"INSTALL_DIR_ON_PATH":    "false",
	} {
		h.Env[k] = v
	}
	h.startContainerd()
	if h.read(d.config()) != rendered {
		t.Fatal("the fake k3s did not render its config")
	}
	return h, rendered
}

func TestK3s(t *testing.T) {
	t.Parallel()
	for _, d := range distros {
		testK3s(t, d)
	}
}

func testK3s(t *testing.T, d distro) {
	k3sDir, k3sConfig, k3sDropIn := d.dir(), d.config(), d.dropIn()
	// k3s from about March 2026: the rendered config imports config-v3.toml.d. Install, a k3s restart, re-run, uninstall.
	t.Run(d.name+"/dropin-lifecycle", func(t *testing.T) {
		t.Parallel()
		h, rendered := newK3sHost(t, d, true)
		h.mustRun("install-runsc.sh", nil)
		r := h.mustRunRestarts("configure-containerd.sh", nil, 1)
		assertContains(t, "output", r.Output, "host: containerd github.com/containerd/containerd/v2 2."+d.ctrd[1:]+".") // the bundled line's stand-in
		assertContains(t, "output", r.Output, "restarting containerd (systemctl restart "+d.unit+" on the host)")
		assertContains(t, "output", r.Output, "containerd's CRI on "+k3sSock+" lists the runsc handler")
		assertContains(t, "output", r.Output, "created "+k3sDir+"/config-v3.toml.d")
		if h.read(k3sConfig) != rendered {
			t.Fatalf("k3s's config changed:\n%s", h.read(k3sConfig))
		}
		din := h.read(k3sDropIn)
		if !strings.Contains(din, tblV3) || !strings.Contains(din, `runtime_path = "/usr/local/bin/containerd-shim-runsc-v1"`) {
			t.Fatalf("the drop-in lacks the v3 table or the absolute shim path:\n%s", din)
		}
		applied := h.read(k3sConfig + ".gvisorgen-applied")
		assertContains(t, "applied marker", applied, "\nmode dropin "+k3sDropIn+"\n")
		assertContains(t, "applied marker", applied, "\ncreated "+k3sDir+"/config-v3.toml.d\n")
		h.mustRun("ready.sh", nil)
		h.mustRunRestarts("configure-containerd.sh", nil, 0)

		// k3s restarts (an upgrade, a reboot): it renders its config again; the drop-in stays and is loaded
		if out, err := h.hostCmd("systemctl", "restart", d.unit); err != nil {
			t.Fatalf("restart %s: %v\n%s", d.unit, err, out)
		}
		h.mustRun("ready.sh", nil)
		r = h.mustRunRestarts("configure-containerd.sh", nil, 0)
		assertContains(t, "output", r.Output, "lists the runsc handler")

		r = h.mustRunRestarts("uninstall.sh", map[string]string{"GVISOR_MODE": "uninstall"}, 1)
		assertContains(t, "uninstall", r.Output, "removed gvisorgen's drop-in "+k3sDropIn)
		if h.exists(k3sDropIn) || h.exists(k3sDir+"/config-v3.toml.d") || h.read(k3sConfig) != rendered {
			t.Fatal("uninstall left the drop-in or its folder, or k3s's config changed")
		}
		h.mustRun("ready.sh", map[string]string{"GVISOR_MODE": "uninstall"})
	})

	// An older k3s: nothing imports a drop-in folder. Refused, nothing written, no restart; with the admin's own
	// template the message names it.
	for _, tmpl := range []bool{false, true} {
		name := d.name + "/no-import-refused"
		if tmpl {
			name += "/admin-template"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h, rendered := newK3sHost(t, d, false)
			want := `no drop-in is possible on this node: ` + k3sConfig + ` imports no folder`
			if tmpl {
				h.write(h.P(k3sDir+"/config-v3.toml.tmpl"), 0o644, "{{ template \"base\" . }}\n")
				want += `.*the template the admin wrote \(` + k3sDir + `/config-v3\.toml\.tmpl\)`
			}
			h.mustRun("install-runsc.sh", nil)
			r0 := h.restarts()
			h.mustFail("configure-containerd.sh", nil, want)
			if h.restarts() != r0 || h.read(k3sConfig) != rendered || h.exists(k3sDir+"/config-v3.toml.d") {
				t.Fatal("the refusal changed something")
			}
		})
	}

	// Why the profile never edits k3s's config in place: forced to (CONTAINERD_CONFIG_MODE=block), the block is
	// written, k3s renders its config again at the restart, the block is gone, and the installer's last check (CRI
	// asked after the restart) refuses to call the node ready.
	t.Run(d.name+"/in-place-is-lost", func(t *testing.T) {
		t.Parallel()
		h, rendered := newK3sHost(t, d, true)
		h.mustRun("install-runsc.sh", nil)
		r0 := h.restarts()
		h.mustFail("configure-containerd.sh", map[string]string{"CONTAINERD_CONFIG_MODE": "block"},
			`containerd's CRI on `+k3sSock+` does not list the runsc handler`)
		if h.restarts()-r0 != 1 || h.read(k3sConfig) != rendered {
			t.Fatalf("want one restart and k3s's config as k3s renders it (the block lost):\n%s", h.read(k3sConfig))
		}
		h.mustFail("ready.sh", nil, ".")
	})
}
