//go:build nodetest

package node

import (
	"path/filepath"
	"strings"
	"testing"
)

// gvisorgen-runsc (issue 27): the runsc runsc.toml names. The shim calls it as runsc with --root=<the root runsc.toml
// named when it created the container>/<namespace>; it runs the release whose state root holds the container (or,
// for a new container joining a sandbox, that sandbox), with --root moved there, and anything else unchanged. Here on
// a node after a bump (tagBin kept for a running sandbox, tagArch current), as the host's sh, bash and busybox sh run
// it; the fake runsc prints its release and its arguments. The node e2e runs it under real shims and runsc.

const (
	rootOf = "/run/gvisorgen/runsc/"
	ns     = "/k8s.io"
)

// dispatch runs the installed gvisorgen-runsc on the host with shell, as the shim would call runsc.
func (h *Host) dispatch(shell []string, args ...string) (string, error) {
	return h.hostCmd(append(append(shell, idir+"/gvisorgen-runsc"), args...)...)
}

// bundle writes an OCI bundle's config.json as containerd's CRI does for a container of type typ in sandbox sid
// (compact, one line; indented when pretty), and returns its folder.
func (h *Host) bundle(name, typ, sid string, pretty bool) string {
	b := "/run/containerd/io.containerd.runtime.v2.task/k8s.io/" + name
	// the container's own env after the annotations, holding their text (JSON-escaped): never taken for them
	j := `{"ociVersion":"1.2.0","annotations":{"io.kubernetes.cri.container-name":"c","io.kubernetes.cri.container-type":"` + typ +
		`","io.kubernetes.cri.sandbox-id":"` + sid + `"},"process":{"args":["sh"],"env":["X=\"io.kubernetes.cri.sandbox-id\":\"new-pod\""]}}`
	if pretty {
		j = strings.NewReplacer(`{"`, "{\n  \"", `","`, "\",\n  \"", `":"`, `": "`, `},"`, "},\n  \"").Replace(j)
	}
	h.write(h.P(b+"/config.json"), 0o644, j)
	return b
}

func TestDispatch(t *testing.T) {
	t.Parallel()
	h := installedHost(t, "24", def24(), false, func(h *Host) {})
	h.mustRun("configure-containerd.sh", nil)
	h.sandbox(tagBin, "old-pod")
	h.mustRun("install-runsc.sh", map[string]string{"GVISOR_VERSION": tagArch})
	h.mustRun("configure-containerd.sh", map[string]string{"GVISOR_VERSION": tagArch})
	h.assertToml(tagArch)
	// a container of the old pod, a new pod on the current release
	h.write(h.P(rootOf+tagBin+ns+"/old-c_sandbox:old-pod.state"), 0o644, "{}")
	h.sandbox(tagArch, "new-pod")
	cur := "--root=" + rootOf + tagArch + ns
	old := "--root=" + rootOf + tagBin + ns
	joinOld := h.bundle("join-old", "container", "old-pod", false)
	joinOldPretty := h.bundle("join-old-pretty", "container", "old-pod", true)
	joinNew := h.bundle("join-new", "container", "new-pod", false)
	joinNone := h.bundle("join-none", "container", "no-such-pod", false)
	newSandbox := h.bundle("new-sb", "sandbox", "new-sb", false)
	for _, tc := range []struct {
		name string
		args []string
		want string // the fake runsc's line: release and arguments
	}{
		{"new-sandbox-gets-the-current-release", []string{cur, "--log-format=json", "--network=none", "create", "--bundle", newSandbox, "--pid-file", newSandbox + "/init.pid", "new-sb"},
			"runsc " + tagArch + " " + cur + " --log-format=json --network=none create --bundle " + newSandbox + " --pid-file " + newSandbox + "/init.pid new-sb"},
		{"new-container-in-an-old-sandbox-gets-its-release", []string{cur, "create", "--bundle", joinOld, "--pid-file", joinOld + "/init.pid", "c2"},
			"runsc " + tagBin + " " + old + " create --bundle " + joinOld + " --pid-file " + joinOld + "/init.pid c2"},
		{"indented-config-json-too", []string{cur, "create", "--bundle=" + joinOldPretty, "c3"},
			"runsc " + tagBin + " " + old + " create --bundle=" + joinOldPretty + " c3"},
		{"new-container-in-a-current-sandbox", []string{cur, "create", "--bundle", joinNew, "c4"},
			"runsc " + tagArch + " " + cur + " create --bundle " + joinNew + " c4"},
		{"a-sandbox-no-root-knows-stays-with-the-passed-release", []string{cur, "create", "--bundle", joinNone, "c5"},
			"runsc " + tagArch + " " + cur + " create --bundle " + joinNone + " c5"},
		{"calls-on-an-old-container-go-to-its-release", []string{cur, "start", "old-c"}, "runsc " + tagBin + " " + old + " start old-c"},
		{"state", []string{cur, "state", "old-pod"}, "runsc " + tagBin + " " + old + " state old-pod"},
		{"kill-names-the-container-before-the-signal", []string{cur, "kill", "--all", "old-c", "9"}, "runsc " + tagBin + " " + old + " kill --all old-c 9"},
		{"delete", []string{cur, "delete", "--force", "old-c"}, "runsc " + tagBin + " " + old + " delete --force old-c"},
		{"exec", []string{cur, "exec", "--process", "/tmp/p.json", "--detach", "--pid-file", "/tmp/x.pid", "old-c"},
			"runsc " + tagBin + " " + old + " exec --process /tmp/p.json --detach --pid-file /tmp/x.pid old-c"},
		{"an-old-root-to-a-current-container", []string{old, "events", "--stats", "new-pod"}, "runsc " + tagArch + " " + cur + " events --stats new-pod"},
		{"the-passed-root-wins-when-it-holds-the-container", []string{old, "state", "old-pod"}, "runsc " + tagBin + " " + old + " state old-pod"},
		{"unknown-container-stays", []string{cur, "state", "gone-c"}, "runsc " + tagArch + " " + cur + " state gone-c"},
		{"no-container-list", []string{cur, "list", "--format=json"}, "runsc " + tagArch + " " + cur + " list --format=json"},
		{"glob-characters-are-no-id", []string{cur, "state", "*"}, "runsc " + tagArch + " " + cur + " state *"},
		{"no-root-is-the-current-release", []string{"--version"}, "runsc " + tagArch + " --version"},
	} {
		for _, sh := range [][]string{{"sh"}, {"bash"}, {busybox, "sh"}} {
			t.Run(tc.name+"/"+filepath.Base(sh[0]), func(t *testing.T) {
				out, err := h.dispatch(sh, tc.args...)
				if err != nil || strings.TrimSpace(out) != tc.want {
					t.Fatalf("gvisorgen-runsc %s: %v\n got: %s\nwant: %s", strings.Join(tc.args, " "), err, strings.TrimSpace(out), tc.want)
				}
			})
		}
	}
	for _, tc := range []struct{ name, arg, want string }{
		{"a-root-not-gvisorgens", "--root=/var/run/runsc", `--root=/var/run/runsc is not under a state root of gvisorgen's`},
		{"a-root-without-namespace", "--root=" + rootOf + tagArch + "/", "names no containerd namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := h.dispatch([]string{"sh"}, tc.arg, "state", "old-c")
			if err == nil || !strings.HasPrefix(out, "gvisorgen-runsc: ") || !strings.Contains(out, tc.want) {
				t.Fatalf("want an error %q, got %v: %s", tc.want, err, out)
			}
		})
	}
	// a container whose release's runsc is gone (by hand): said, not run with another release's runsc
	t.Run("release-gone", func(t *testing.T) {
		h.write(h.P(rootOf+"19990101"+ns+"/lost-c_sandbox:lost-c.state"), 0o644, "{}")
		out, err := h.dispatch([]string{"sh"}, cur, "delete", "lost-c")
		if err == nil || !strings.Contains(out, "the state of this container is in "+rootOf+"19990101"+ns+", but that release's runsc ("+idir+"/gvisor-releases/19990101/runsc) is gone") {
			t.Fatalf("want the gone release named, got %v: %s", err, out)
		}
	})
}

// A node moved from an unversioned install with a sandbox of it running: a new container in that sandbox gets the
// unversioned runsc (INSTALL_DIR/runsc) and the shim's default root, which it used.
func TestDispatchLegacy(t *testing.T) {
	t.Parallel()
	h := newHost(t, "24")
	h.setConfig(def24())
	h.startContainerd()
	h.mustRun("configure-containerd.sh", nil)
	h.legacyInstall(tagOld)
	h.sandbox("legacy", "legacy-pod")
	h.mustRun("install-runsc.sh", nil)
	h.mustRun("configure-containerd.sh", nil)
	h.assertToml(tagBin)
	join := h.bundle("join-legacy", "container", "legacy-pod", false)
	cur := "--root=" + rootOf + tagBin + ns
	out, err := h.dispatch([]string{"sh"}, cur, "create", "--bundle", join, "c")
	if want := "runsc " + tagOld + " --root=/run/containerd/runsc" + ns + " create --bundle " + join + " c"; err != nil || strings.TrimSpace(out) != want {
		t.Fatalf("got %v: %s\nwant: %s", err, out, want)
	}
	out, err = h.dispatch([]string{"sh"}, cur, "state", "legacy-pod")
	if want := "runsc " + tagOld + " --root=/run/containerd/runsc" + ns + " state legacy-pod"; err != nil || strings.TrimSpace(out) != want {
		t.Fatalf("got %v: %s\nwant: %s", err, out, want)
	}
}

// A file named gvisorgen-runsc that gvisorgen did not write is never written over (refused before any download,
// whatever ADOPT_FOREIGN_RUNSC says); one of gvisorgen's that changed on disk closes the readiness probe, and the
// next run writes it back.
func TestDispatchIsGvisorgens(t *testing.T) {
	t.Parallel()
	t.Run("foreign-refused", func(t *testing.T) {
		t.Parallel()
		h := newHost(t, "24")
		h.setConfig(def24())
		h.startContainerd()
		h.write(h.P(idir+"/gvisorgen-runsc"), 0o755, "#!/bin/sh\nexec /opt/other/runsc \"$@\"\n")
		for _, adopt := range []string{"false", "true"} {
			r := h.mustFail("install-runsc.sh", map[string]string{"ADOPT_FOREIGN_RUNSC": adopt},
				`/usr/local/bin/gvisorgen-runsc exists and gvisorgen did not write it .*: refusing to write over it; move it away \(nothing was downloaded or changed\)`)
			if strings.Contains(r.Output, "downloading") {
				t.Fatal("downloaded before refusing")
			}
		}
		if got := h.read(idir + "/gvisorgen-runsc"); !strings.Contains(got, "/opt/other/runsc") {
			t.Fatalf("the foreign gvisorgen-runsc changed: %s", got)
		}
		if h.exists(idir + "/.gvisorgen-runsc.stamp") {
			t.Fatal("a stamp was written")
		}
	})
	t.Run("changed-closes-the-probe-and-is-written-back", func(t *testing.T) {
		t.Parallel()
		h := installedHost(t, "24", def24(), false, func(h *Host) {})
		h.mustRun("configure-containerd.sh", nil)
		h.mustRun("ready.sh", nil)
		orig := h.read(idir + "/gvisorgen-runsc")
		h.write(h.P(idir+"/gvisorgen-runsc"), 0o755, orig+"# edited\n")
		h.mustFail("ready.sh", nil, `/usr/local/bin/gvisorgen-runsc no longer has the sha512 the stamp records`)
		r := h.mustRun("install-runsc.sh", nil)
		assertContains(t, "output", r.Output, "verifies; putting the shim and gvisorgen-runsc in /usr/local/bin back as it records them, no download")
		assertContains(t, "output", r.Output, "wrote /usr/local/bin/gvisorgen-runsc")
		if h.read(idir+"/gvisorgen-runsc") != orig {
			t.Fatal("gvisorgen-runsc not written back")
		}
		h.mustRun("ready.sh", nil)
		// and left alone when it is right
		r = h.mustRun("install-runsc.sh", nil)
		assertContains(t, "output", r.Output, "already installed")
	})
}
