package vet

import (
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/gvisorgen/gvisorgen/internal/eval"
)

// gvisorgen's policies: what vet refuses on purpose although Kubernetes
// allows it. Each message says why. (Two more policies live in the CUE
// schema: a negative terminationGracePeriodSeconds, which the server only
// warns about, and a relative hostPath, which the kubelet would resolve
// against its own working directory.)

// Policies are gvisorgen's policies by the name a target waives them with
// (policy.waive.<name> in its values; cue/values.cue lists the same names
// as #PolicyID).
var Policies = map[string]string{
	"runtimeclass-handler": "the RuntimeClass handler is runsc or a sandbox class's runsc-<name>, the runtimes the installer registers",
	"managed-storageclass": "no StorageClass under a name the cloud manages itself",
	"mutable-image":        "every image is pinned by a release tag or a digest, never latest or no tag",
	"unpinned-release":     "the profile requires a pinned sha512 for every artifact its nodes install",
	"unpinned-image":       "the profile requires the installer image pinned by digest",
	"runsc-isolation":      "no runsc flag that hands the host, or the sandbox's configuration, to the workload (RunscFlags)",
	"unsigned-artifact":    "Flux verifies every OCI artifact it applies (verify.provider cosign): the installer it carries runs as root on every node",
}

// Handler is the default class's RuntimeClass handler; the installer
// registers it and one runsc-<suffix> handler per further sandbox class.
const Handler = "runsc"

// classHandler is the shape of a further class's handler, as cue/classes.cue
// (#ClassHandler) spells it; a test holds the two to one corpus.
var classHandler = regexp.MustCompile(`^runsc-[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// IsClassHandler says whether h is a handler a sandbox class may have.
func IsClassHandler(h string) bool {
	return classHandler.MatchString(h) && len(h) <= 56 && h != "runsc-version"
}

// Facts are what the policies need to know of the profiles; they come from
// the CUE module (#ProfileFacts), the profiles' one home.
type Facts struct {
	// Managed maps each StorageClass name a cloud manages itself to the
	// profiles whose clusters have it.
	Managed map[string]string
}

// FactsOf reads the facts of a loaded module.
func FactsOf(ev *eval.Evaluator) (Facts, error) {
	f := Facts{Managed: map[string]string{}}
	profiles, err := ev.ProfileFacts()
	if err != nil {
		return f, err
	}
	for _, p := range profiles {
		for _, n := range p.ManagedStorageClasses {
			if f.Managed[n] != "" {
				f.Managed[n] += ", "
			}
			f.Managed[n] += p.Name
		}
	}
	return f, nil
}

func (c *checker) runtimeClassPolicy(o *nodev1.RuntimeClass) {
	if o.Handler != Handler && !IsClassHandler(o.Handler) {
		c.policy("runtimeclass-handler", p("handler"), "handler %q: the installer registers containerd's runtime %q and one runsc-<name> per sandbox class (gvisor.classes) only; with any other handler every pod of this RuntimeClass fails to start (use handler: %s, or a class's handler)",
			o.Handler, Handler, Handler)
	}
}

func (c *checker) storageClassPolicy(o *storagev1.StorageClass) {
	if who, ok := c.facts.Managed[o.Name]; ok {
		c.policy("managed-storageclass", p("metadata", "name"), "StorageClass %q is created and managed by %s: its parameters are immutable, so applying over it fails or fights the cloud; name the class differently (gvisor-workspace) or reference the existing one with storageClass: {create: false, name: %s}",
			o.Name, who, o.Name)
	}
}

// images checks every container's image: it must be pinned by a tag other
// than latest, or by a digest.
func (c *checker) images(base []any, s *corev1.PodSpec) {
	for _, l := range []struct {
		field string
		cs    []corev1.Container
	}{{"initContainers", s.InitContainers}, {"containers", s.Containers}} {
		for i, ctr := range l.cs {
			if msg := imagePolicy(ctr.Image); msg != "" {
				c.policy("mutable-image", at(base, l.field, i, "image"), "%s", msg)
			}
		}
	}
}

// imagePolicy says what is wrong with an image reference, or "".
func imagePolicy(image string) string {
	if image == "" || strings.Contains(image, "@") {
		return "" // empty is a schema error; a digest pins the image
	}
	name := image
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	_, tag, hasTag := strings.Cut(name, ":")
	switch {
	case !hasTag:
		return "image " + quote(image) + " has no tag, which means :latest, a mutable tag: nodes could run different installers and Argo CD / Flux would not see a change; pin a release tag or a digest (@sha256:...)"
	case tag == "latest":
		return "image " + quote(image) + " uses the mutable tag latest: nodes could run different installers and Argo CD / Flux would not see a change; pin a release tag or a digest (@sha256:...)"
	}
	return ""
}

func quote(s string) string { return `"` + s + `"` }

// ociRepositoryPolicy: an OCIRepository that applies what a registry serves,
// unverified, lets whoever can push to that repository (or sits between it
// and the cluster with a registry credential) root every node.
func (c *checker) ociRepositoryPolicy(verify map[string]any) {
	if verify == nil {
		c.policy("unsigned-artifact", p("spec", "verify"), "OCIRepository without verify: Flux would apply whatever the registry serves under the tag, and the installer in it runs as root on every node; keep delivery.oci.verify (sign with gvisorgen push --key), or waive unsigned-artifact with a reason")
	}
}
