package vet

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/gvisorgen/gvisorgen/internal/eval"
	"github.com/gvisorgen/gvisorgen/internal/warn"
)

// Supply chain: every artifact a node installs must be pinned (its sha512
// in the committed values) or fetched over TLS verified against a real CA;
// the installer enforces that on the node. Here the generator says, per
// target, exactly which pins are missing, refuses what the node would refuse
// (an unpinned artifact over http://), and holds the profiles that require
// pins (#ProfileFacts) to it, which only a waiver relaxes.

// Release is what pinning reads of a target's values: what its nodes
// download and run, and the profile's pin requirement. vet and `gvisorgen
// pin` read it the same way (ReleaseOf).
type Release struct {
	Policy struct {
		RequirePins bool `json:"requirePins"`
	} `json:"policy"`
	Gvisor struct {
		Enabled bool   `json:"enabled"`
		Version string `json:"version"`
		Release struct {
			BaseURL   string                       `json:"baseURL"`
			SHA512    map[string]map[string]string `json:"sha512"`
			Artifacts map[string][]string          `json:"artifacts"`
		} `json:"release"`
		Installer struct {
			Mode  string `json:"mode"`
			Image Image  `json:"image"`
		} `json:"installer"`
		ReadinessGate struct {
			Enabled bool  `json:"enabled"`
			Image   Image `json:"image"`
		} `json:"readinessGate"`
	} `json:"gvisor"`
}

// Image is an image's values: repository, tag and the digest it is pulled by.
type Image struct {
	Repository string `json:"repository"`
	Tag        string `json:"tag"`
	Digest     string `json:"digest"`
}

// PinnedImage is one image a target's nodes run and whose digest pinning
// reads: the values path it is set at, and the image.
type PinnedImage struct {
	Field string
	Image Image
	// Why a moving tag matters for this image.
	risk string
}

// Images are the images a target's nodes run, in a fixed order: the
// installer's, and the readiness gate's kubectl when the gate is on.
func (v *Release) Images() []PinnedImage {
	out := []PinnedImage{{Field: "gvisor.installer.image", Image: v.Gvisor.Installer.Image,
		risk: "every node runs the installer privileged"}}
	if g := v.Gvisor.ReadinessGate; g.Enabled {
		out = append(out, PinnedImage{Field: "gvisor.readinessGate.image", Image: g.Image,
			risk: "every node runs it with a token that may label the node"})
	}
	return out
}

// ReleaseOf reads a target's values (JSON).
func ReleaseOf(values []byte) (*Release, error) {
	var v Release
	if err := json.Unmarshal(values, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// missing lists, as arch/artifact, the artifacts a target's nodes download
// that its values pin no digest for, sorted.
func missing(v *Release) []string {
	var out []string
	for arch, names := range v.Gvisor.Release.Artifacts {
		for _, n := range names {
			if v.Gvisor.Release.SHA512[arch][n] == "" {
				out = append(out, arch+"/"+n)
			}
		}
	}
	sort.Strings(out)
	return out
}

// pinAction is what every unpinned warning asks for.
const pinAction = "run `gvisorgen pin`"

// pinFindings are a target's supply-chain errors (some are waivable
// policies) and warnings.
func pinFindings(t eval.Target) (errs []finding, warns []warn.Warning) {
	v, err := ReleaseOf(t.Values)
	if err != nil || !v.Gvisor.Enabled {
		return nil, nil
	}
	rel := &v.Gvisor.Release
	if miss := missing(v); len(miss) > 0 && v.Gvisor.Installer.Mode != "uninstall" {
		list := strings.Join(miss, ", ")
		switch {
		case strings.HasPrefix(rel.BaseURL, "http://"):
			// Not a policy: the node refuses it whatever the values say.
			errs = append(errs, finding{field: "gvisor.release.baseURL", msg: fmt.Sprintf("gvisor.release.baseURL %s is plain http: the installer installs an unpinned artifact only when it was fetched over https with a verified certificate, so every node would refuse %s of release %s; pin them (`gvisorgen pin`) or serve the mirror over https",
				rel.BaseURL, list, v.Gvisor.Version)})
		case v.Policy.RequirePins:
			errs = append(errs, finding{policy: "unpinned-release", field: "gvisor.release.sha512", msg: fmt.Sprintf("gvisorgen policy unpinned-release: gvisor.release.sha512 pins no digest for %s of release %s, and the profile %s requires pins: run `gvisorgen pin` (it writes cue/pins.cue from the published digests, fetched over verified TLS), or waive unpinned-release with a reason",
				list, v.Gvisor.Version, t.Profile)})
		default:
			warns = append(warns, warn.Warning{Cause: warn.Unpinned, Target: t.Name, Subject: "gvisor.release.sha512", Action: pinAction, Example: t.Example,
				Message: fmt.Sprintf("target %s: gvisor.release.sha512 pins no digest for %s of release %s: each node installs only what the host's curl fetched over verified TLS (the mirror and its CA are trusted); run `gvisorgen pin` to pin them",
					t.Name, list, v.Gvisor.Version)})
		}
	}
	for _, pi := range v.Images() {
		img := pi.Image
		if img.Digest != "" {
			continue
		}
		msg := fmt.Sprintf("%s %s:%s has no digest: the tag can move under a committed tree and %s", pi.Field, img.Repository, img.Tag, pi.risk)
		if v.Policy.RequirePins {
			errs = append(errs, finding{policy: "unpinned-image", field: pi.Field, msg: "gvisorgen policy unpinned-image: " + msg + "; run `gvisorgen pin` (it resolves the tag to its digest), or waive unpinned-image with a reason"})
		} else {
			warns = append(warns, warn.Warning{Cause: warn.Unpinned, Target: t.Name, Subject: pi.Field, Action: pinAction, Example: t.Example,
				Message: fmt.Sprintf("target %s: %s; run `gvisorgen pin` to pin it", t.Name, msg)})
		}
	}
	return errs, warns
}
