//go:build nodetest

package node

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"crypto/sha512"
	"encoding/hex"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Global test fixture, built once in TestMain.
var (
	repoRoot    string // the repository (scripts live in cue/installer)
	scriptsDir  string
	work        string // scratch for the whole run
	bbDir       string // busybox applets only: the PATH of every script run
	busybox     string
	ctrd16      string // Debian's containerd 1.6
	ctrd24      string // containerd 2.4.2 built from its module
	ctrd22      string // containerd 2.2.9 built from its module (the drop-in cases)
	ctrd23      string // containerd 2.3.4 built from its module (RKE2's agent node)
	ctrd17      string // containerd 1.7 built from its module in a wrapper module (ci/containerd17)
	ctrBin      string // ctr client (Debian's)
	crictlBin   string // crictl (ci/node/setup.sh builds it): the hosts that have one ask CRI for the runsc handler
	hostExecBin string // ci/node/hostexec, built by TestMain: every host's HOST_EXEC (Host.hostExec)
	httpdURL    string // busybox httpd serving work/serve
	faultURL    string // Go server with fault injection
	refusedURL  string // nothing listens there
	artSHA      = map[string]string{}
	defaults    = map[string][]byte{} // "16", "24": `containerd config default`
	faultCounts sync.Map              // path → *atomic.Int64: requests /flaky/ got
	hangHits    sync.Map              // token → *atomic.Int64: requests /hang/<token>/... got (a download in flight)
)

const (
	tagOld     = "20231120" // binaries layout, older release (upgrade source)
	tagBin     = "20240212" // binaries layout (the seed's default)
	tagArch    = "20260801" // archive layout, files at the top of the archive
	tagArchDir = "20261015" // archive layout, files inside one folder
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func run(m *testing.M) (code int) {
	start := time.Now()
	var missing []string
	get := func(env, def string) string {
		v := os.Getenv(env)
		if v == "" {
			v = def
		}
		if v == "" {
			missing = append(missing, env+" (unset)")
			return ""
		}
		if _, err := os.Stat(v); err != nil {
			missing = append(missing, fmt.Sprintf("%s=%s (%v)", env, v, err))
		}
		return v
	}
	ctrd16 = get("CONTAINERD16", "")
	ctrd24 = get("CONTAINERD24", "")
	ctrd22 = get("CONTAINERD22", "")
	ctrd23 = get("CONTAINERD23", "")
	ctrd17 = get("CONTAINERD17", "")
	busybox = get("BUSYBOX", "/bin/busybox")
	ctrBin = get("CTR", "/usr/bin/ctr")
	crictlBin = get("CRICTL", "")
	// curl: the fake host's curl, which install-runsc uses for unpinned downloads (verified TLS).
	for _, tool := range []string{"unshare", "mount", "tar", "bzip2", "setsid", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool+" (not on PATH)")
		}
	}
	if len(missing) > 0 {
		// A missing binary is a failure, never a skip: run ci/node/setup.sh first.
		fmt.Fprintf(os.Stderr, "FAIL: the node tests need (run ci/node/setup.sh): %s\n", strings.Join(missing, "; "))
		return 1
	}
	wd, err := os.Getwd()
	must(err)
	repoRoot = filepath.Clean(filepath.Join(wd, "..", ".."))
	scriptsDir = filepath.Join(repoRoot, "cue", "installer")
	work, err = os.MkdirTemp("", "gvisorgen-node-")
	must(err)
	defer os.RemoveAll(work)
	trackDir(work)
	// after the servers below have stopped (defers run last first): anything of the run still running is a leak, which
	// fails the run (go test shows a passing run's output to no one)
	defer func() {
		// what ends on its own within 3 s is no leak: busybox's timeout leaves its watchdog polling for up to a second
		// after the command it guards has exited
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline) && suiteRunning(); {
			time.Sleep(100 * time.Millisecond)
		}
		if left := reapSuite(); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "FAIL: node suite: still running after every test ended (a test's cleanup missed them), killed: %s\n", strings.Join(left, " "))
			code = max(code, 1)
		}
	}()

	hostExecBin = filepath.Join(work, "hostexec")
	build := exec.Command("go", "build", "-trimpath", "-o", hostExecBin, "./hostexec")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: building ci/node/hostexec: %v\n%s", err, out)
		return 1
	}

	// busybox-only PATH
	bbDir = filepath.Join(work, "bb")
	must(os.MkdirAll(bbDir, 0o755))
	out, err := exec.Command(busybox, "--list").Output()
	must(err)
	for _, a := range strings.Fields(string(out)) {
		must(os.Symlink(busybox, filepath.Join(bbDir, a)))
	}

	for k, bin := range map[string]string{"16": ctrd16, "17": ctrd17, "22": ctrd22, "23": ctrd23, "24": ctrd24} {
		out, err := exec.Command(bin, "config", "default").Output()
		must(err)
		defaults[k] = out
	}

	buildArtifacts(filepath.Join(work, "serve"))

	port := freePort()
	httpd := exec.Command(busybox, "httpd", "-f", "-p", fmt.Sprintf("127.0.0.1:%d", port), "-h", filepath.Join(work, "serve"))
	must(httpd.Start())
	defer func() { _ = httpd.Process.Kill(); _, _ = httpd.Process.Wait() }()
	httpdURL = fmt.Sprintf("http://127.0.0.1:%d", port)
	waitHTTP(httpdURL + "/release/" + tagBin + "/x86_64/runsc.sha512")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	srv := &http.Server{Handler: http.HandlerFunc(fault)}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	faultURL = "http://" + ln.Addr().String()
	refusedURL = fmt.Sprintf("http://127.0.0.1:%d", freePort())
	defer startTLSServers()()

	fmt.Printf("node test fixture ready in %.1fs (busybox %s, containerd 1.6 %s, 1.7 %s, 2.4 %s)\n",
		time.Since(start).Seconds(), busybox, ctrd16, ctrd17, ctrd24)
	flag.Parse() // go test's -timeout, which guardSuite reads
	defer guardSuite()()
	return m.Run()
}

func freePort() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func waitHTTP(url string) {
	for i := 0; i < 100; i++ {
		if r, err := http.Get(url); err == nil {
			r.Body.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	panic("artifact server did not come up: " + url)
}

func sum(b []byte) string {
	s := sha512.Sum512(b)
	return hex.EncodeToString(s[:])
}

// nvproxyDropped is the NVIDIA driver that the fake runsc of tagArch does not list (the real list of the others does):
// a bump from tagBin to tagArch drops a node's driver.
const nvproxyDropped = "570.172.08"

// nvproxyBroken: on the fake host, makes the fake runsc answer `nvproxy list-supported-drivers` with usage text.
const nvproxyBroken = "/run/fake-dev/nvproxy-broken"

// nvproxyBranch: as runsc, `nvproxy list-supported-drivers` prints the real list of gVisor's build in
// testdata/nvproxy-drivers.txt (tagArch's without nvproxyDropped).
func nvproxyBranch(tag string) string {
	b, err := os.ReadFile(filepath.Join("testdata", "nvproxy-drivers.txt"))
	must(err)
	var vs []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") && (tag != tagArch || l != nvproxyDropped) {
			vs = append(vs, l)
		}
	}
	return "if [ \"${1:-}\" = nvproxy ] && [ \"${2:-}\" = list-supported-drivers ]; then\n" +
		// a runsc that answers with its usage text instead (several lines, quotes, a tab): the installer's reason
		// must stay one line, and the Events JSON
		"if [ -e " + nvproxyBroken + " ]; then printf 'Usage of \"runsc\":\\n\\t-root string\\n\"runsc\" exited: 2 \\\\ bad\\n' >&2; exit 2; fi\n" +
		"printf '%s\\n' " + strings.Join(vs, " ") + "\nexit 0\nfi\n"
}

// kvmBranch: as runsc, a sandbox on the KVM platform (`--platform=kvm ... do true`, the installer's kvm check) fails
// as runsc does where KVM does not run it, when the fake host has kvmBroken; otherwise it runs (exit 0).
const kvmBranch = `case " $* " in *" --platform=kvm "*" do "*)
[ -n "${TMPDIR:-}" ] && [ -d "$TMPDIR" ] && mkdir "$TMPDIR/runsc-do123"
if [ -e ` + kvmBroken + ` ]; then echo "FATAL ERROR: error setting up KVM: KVM_RUN failed: bad address" >&2; exit 128; fi
if [ -e ` + kvmHangs + ` ]; then echo $$ >` + kvmHangs + `; exec sleep 3600; fi ;;
esac
`

// kvmBroken and kvmHangs: on the fake host, make the fake runsc's KVM sandbox fail, or hang as on a nested PVM host
// (writing its PID into kvmHangs first).
const (
	kvmBroken = "/run/fake-dev/kvm-broken"
	kvmHangs  = "/run/fake-dev/kvm-hangs"
)

// fakeBinary is an executable shell script padded with random bytes (so truncation changes the digest). As runsc,
// `--root DIR list -quiet` lists the containers whose state files (<sandbox>_sandbox:<id>.state, runsc's naming) are
// in DIR: a test "runs a sandbox" of a release by writing one into the release's state root. Anything else: prints its
// name, its tag and its arguments (which release gvisorgen-runsc ran, and how).
func fakeBinary(name, tag string) []byte {
	pad := make([]byte, 64<<10)
	_, _ = rand.Read(pad)
	list := `if [ "${1:-}" = --root ] && [ "${3:-}" = list ]; then
for f in "$2"/*.state; do [ -e "$f" ] || continue; f=${f##*/}; f=${f%.state}; echo "${f##*:}"; done
exit 0
fi
`
	if name == "runsc" {
		list += nvproxyBranch(tag) + kvmBranch
	}
	return append([]byte(fmt.Sprintf("#!/bin/sh\n%secho %s %s \"$@\"\nexit 0\n#", list, name, tag)), []byte(hex.EncodeToString(pad))...)
}

func writeArtifact(dir, name string, b []byte, shaLine string) {
	must(os.MkdirAll(dir, 0o755))
	must(os.WriteFile(filepath.Join(dir, name), b, 0o644))
	if shaLine == "" {
		shaLine = sum(b) + "  " + name + "\n"
	}
	must(os.WriteFile(filepath.Join(dir, name+".sha512"), []byte(shaLine), 0o644))
}

// buildArtifacts lays out a release bucket: <root>/release/<tag>/x86_64/<artifact>[.sha512], and variants.
func buildArtifacts(root string) {
	for _, tag := range []string{tagOld, tagBin} {
		dir := filepath.Join(root, "release", tag, "x86_64")
		for _, n := range []string{"runsc", "containerd-shim-runsc-v1"} {
			b := fakeBinary(n, tag)
			artSHA[tag+"/"+n] = sum(b)
			writeArtifact(dir, n, b, "")
			if tag == tagBin {
				// same files, wrong published digest
				writeArtifact(filepath.Join(root, "badsha", tag, "x86_64"), n, b, strings.Repeat("0", 128)+"  "+n+"\n")
			}
		}
	}
	for _, tag := range []string{tagArch, tagArchDir} {
		prefix := ""
		if tag == tagArchDir {
			prefix = "gvisor-" + tag + "/"
		}
		files := map[string][]byte{
			"runsc":                    fakeBinary("runsc", tag),
			"containerd-shim-runsc-v1": fakeBinary("containerd-shim-runsc-v1", tag),
			"gvisor-bin/helper-a":      fakeBinary("helper-a", tag),
			"gvisor-bin/helper-b":      fakeBinary("helper-b", tag),
		}
		for n, b := range files {
			artSHA[tag+"/"+n] = sum(b)
		}
		b := tarBz2(prefix, files)
		artSHA[tag+"/gvisor.tar.bz2"] = sum(b)
		writeArtifact(filepath.Join(root, "release", tag, "x86_64"), "gvisor.tar.bz2", b, "")
	}
	// An archive with a '..' entry.
	evil := tarBz2("", map[string][]byte{"runsc": []byte("x"), "containerd-shim-runsc-v1": []byte("x"), "gvisor-bin/a": []byte("x"), "../../evil": []byte("x")})
	artSHA["evil/gvisor.tar.bz2"] = sum(evil)
	writeArtifact(filepath.Join(root, "evil", tagArch, "x86_64"), "gvisor.tar.bz2", evil, "")
	// One whose '..' entry comes last, once the release's own files are unpacked (the installer judges the names as it
	// unpacks into its private folder: nothing may leave that folder).
	evilLate := tarBz2("", map[string][]byte{"runsc": []byte("x"), "containerd-shim-runsc-v1": []byte("x"), "gvisor-bin/a": []byte("x"), "zz/../../../evil": []byte("x")})
	artSHA["evil-late/gvisor.tar.bz2"] = sum(evilLate)
	writeArtifact(filepath.Join(root, "evil-late", tagArch, "x86_64"), "gvisor.tar.bz2", evilLate, "")
	// A substitute runsc with a matching published .sha512 (and the genuine shim): what an attacker in the path serves.
	subst := fakeBinary("runsc", "SUBSTITUTE")
	artSHA["subst/runsc"] = sum(subst)
	writeArtifact(filepath.Join(root, "subst", tagBin, "x86_64"), "runsc", subst, "")
	b, err := os.ReadFile(filepath.Join(root, "release", tagBin, "x86_64", "containerd-shim-runsc-v1"))
	must(err)
	writeArtifact(filepath.Join(root, "subst", tagBin, "x86_64"), "containerd-shim-runsc-v1", b, "")
}

// tarBz2 makes a .tar.bz2 (Go has no bzip2 writer: tar in Go, compress with the bzip2 command).
func tarBz2(prefix string, files map[string][]byte) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if prefix != "" {
		must(tw.WriteHeader(&tar.Header{Name: prefix, Typeflag: tar.TypeDir, Mode: 0o755}))
	}
	must(tw.WriteHeader(&tar.Header{Name: prefix + "gvisor-bin/", Typeflag: tar.TypeDir, Mode: 0o755}))
	for _, n := range sortedKeys(files) {
		b := files[n]
		must(tw.WriteHeader(&tar.Header{Name: prefix + n, Mode: 0o755, Size: int64(len(b)), Typeflag: tar.TypeReg}))
		_, err := tw.Write(b)
		must(err)
	}
	must(tw.Close())
	cmd := exec.Command("bzip2", "-c")
	cmd.Stdin = &buf
	out, err := cmd.Output()
	must(err)
	return out
}

// fault serves the release bucket with injected faults:
//
//	/hang/...      never answers (timeouts); counts the requests per first path segment (hangHits)
//	/trunc/...     announces the full length, sends half, closes
//	/flaky/<n>[-<name>]/... fails with 503 the first <n> times per path, then serves the file (a name of its own keeps
//	               a test apart from another running in parallel)
func fault(w http.ResponseWriter, r *http.Request) {
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 2)
	if len(parts) < 2 {
		http.NotFound(w, r)
		return
	}
	serve := filepath.Join(work, "serve", "release")
	switch parts[0] {
	case "hang":
		token, _, _ := strings.Cut(parts[1], "/")
		counter(&hangHits, token).Add(1)
		select {
		case <-r.Context().Done():
		case <-time.After(60 * time.Second):
		}
	case "trunc":
		b, err := os.ReadFile(filepath.Join(serve, parts[1]))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		if strings.HasSuffix(parts[1], ".sha512") {
			_, _ = w.Write(b)
			return
		}
		hj, _ := w.(http.Hijacker)
		conn, bw, err := hj.Hijack()
		if err != nil {
			return
		}
		fmt.Fprintf(bw, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nContent-Type: application/octet-stream\r\n\r\n", len(b))
		_, _ = bw.Write(b[:len(b)/2])
		_ = bw.Flush()
		_ = conn.Close()
	case "flaky":
		rest := strings.SplitN(parts[1], "/", 2)
		var n int
		fmt.Sscanf(rest[0], "%d", &n)
		if counter(&faultCounts, r.URL.Path).Add(1) <= int64(n) {
			http.Error(w, "flaky", http.StatusServiceUnavailable)
			return
		}
		http.ServeFile(w, r, filepath.Join(serve, rest[1]))
	default:
		http.NotFound(w, r)
	}
}

// counter is m's counter for key (tests run in parallel: each counts its own).
func counter(m *sync.Map, key string) *atomic.Int64 {
	v, _ := m.LoadOrStore(key, new(atomic.Int64))
	return v.(*atomic.Int64)
}
