package gen

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/gobwas/glob"

	"github.com/gvisorgen/gvisorgen/internal/eval"
)

// appProject is what of the generated Argo CD AppProject decides whether
// it lets a target's Application sync.
type appProject struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		SourceRepos                []string      `json:"sourceRepos"`
		Destinations               []destination `json:"destinations"`
		ClusterResourceWhitelist   []groupKind   `json:"clusterResourceWhitelist"`
		NamespaceResourceWhitelist []groupKind   `json:"namespaceResourceWhitelist"`
	} `json:"spec"`
}

// destination is an Argo CD ApplicationDestination: a cluster by server URL
// or name, and a namespace; in a project, each may be a glob.
type destination struct {
	Server    string `json:"server"`
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

type groupKind struct {
	Group string `json:"group"`
	Kind  string `json:"kind"`
}

// groupOf is the API group of an apiVersion ("" for the core group).
func groupOf(apiVersion string) string {
	for i := range apiVersion {
		if apiVersion[i] == '/' {
			return apiVersion[:i]
		}
	}
	return ""
}

// projectProblems checks every target whose Application uses the generated
// AppProject against it: Argo CD would otherwise refuse the sync ("resource
// ... is not permitted in project"), on the cluster, long after review. The
// kinds are also held to #OverlayKinds by CUE; the namespaces and the
// repository are values a target may change (fleet.argocd.namespaces says
// which the project allows).
func projectProblems(res *eval.Result) ([]string, error) {
	var proj *appProject
	for _, o := range res.Fleet {
		if o.Kind == "AppProject" {
			proj = &appProject{}
			if err := json.Unmarshal(o.JSON, proj); err != nil {
				return nil, fmt.Errorf("AppProject %s: %w", o.Name, err)
			}
		}
	}
	if proj == nil {
		return nil, nil
	}
	var namespaces []string
	for _, d := range proj.Spec.Destinations {
		namespaces = append(namespaces, d.Namespace)
	}
	var out []string
	for _, t := range res.Targets {
		for _, d := range t.Delivery {
			if d.Kind != "Application" {
				continue
			}
			var app struct {
				Spec struct {
					Project     string      `json:"project"`
					Destination destination `json:"destination"`
					Source      struct {
						RepoURL string `json:"repoURL"`
					} `json:"source"`
				} `json:"spec"`
			}
			if err := json.Unmarshal(d.JSON, &app); err != nil {
				return nil, fmt.Errorf("target %s: Application %s: %w", t.Name, d.Name, err)
			}
			if app.Spec.Project != proj.Metadata.Name {
				continue
			}
			if repo := app.Spec.Source.RepoURL; !proj.permitsSource(repo) {
				field, fix := "delivery.repoURL", "use fleet.repoURL"
				if strings.HasPrefix(repo, "oci://") {
					field, fix = "delivery.oci.url", "put the artifact under fleet.oci.repository (the project allows <repository>/*)"
				}
				out = append(out, fmt.Sprintf("target %s: %s %s is not a source of the Argo CD project %s (%v): Argo CD would refuse the Application; %s, or a project of your own (delivery.argocd.project)%s",
					t.Name, field, repo, proj.Metadata.Name, proj.Spec.SourceRepos, fix, t.Where(field)))
			}
			if !proj.permits(app.Spec.Destination) {
				out = append(out, fmt.Sprintf("target %s: the Application's destination %s is not one the Argo CD project %s allows (%s): Argo CD would refuse it before any sync%s",
					t.Name, app.Spec.Destination, proj.Metadata.Name, proj.destinations(), t.Where("delivery.argocd.destination")))
			}
			for _, o := range t.Objects {
				gk := groupKind{groupOf(o.APIVersion), o.Kind}
				switch {
				case o.Namespace == "" && !slices.Contains(proj.Spec.ClusterResourceWhitelist, gk),
					o.Namespace != "" && !slices.Contains(proj.Spec.NamespaceResourceWhitelist, gk):
					out = append(out, fmt.Sprintf("target %s: %s %s is not allowed by the Argo CD project %s: add its kind to #OverlayKinds (cue/objects.cue)",
						t.Name, o.Kind, o.Name, proj.Metadata.Name))
				case o.Namespace != "" && !slices.Contains(namespaces, o.Namespace):
					out = append(out, fmt.Sprintf("target %s: %s %s is in namespace %s, which the Argo CD project %s does not allow (%v): add it to fleet.argocd.namespaces",
						t.Name, o.Kind, o.Name, o.Namespace, proj.Metadata.Name, namespaces))
				}
			}
		}
	}
	for _, o := range res.Fleet {
		if o.Kind != "ApplicationSet" {
			continue
		}
		var set struct {
			Spec struct {
				Template struct {
					Spec struct {
						Project     string      `json:"project"`
						Destination destination `json:"destination"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(o.JSON, &set); err != nil {
			return nil, fmt.Errorf("ApplicationSet %s: %w", o.Name, err)
		}
		ts := set.Spec.Template.Spec
		if ts.Project == proj.Metadata.Name && !proj.permits(ts.Destination) {
			out = append(out, fmt.Sprintf("ApplicationSet %s: the template's destination %s is not one the Argo CD project %s allows (%s): Argo CD would refuse every Application it generates",
				o.Name, ts.Destination, proj.Metadata.Name, proj.destinations()))
		}
	}
	return out, nil
}

func (d destination) String() string {
	cluster := d.Server
	if d.Name != "" {
		cluster = "name " + d.Name
	}
	return fmt.Sprintf("{cluster %q, namespace %q}", cluster, d.Namespace)
}

func (p *appProject) destinations() string {
	var s []string
	for _, d := range p.Spec.Destinations {
		s = append(s, d.String())
	}
	return strings.Join(s, ", ")
}

// permits is Argo CD's AppProject.isDestinationMatched (v3.6,
// pkg/apis/application/v1alpha1/app_project_types.go), deny patterns
// included: a cluster (by server or name) and the namespace must both match
// one entry, and a "!" entry that does not match refuses. The ApplicationSet
// template's "{{ .server }}" matches only a "*" server, as it must: its
// clusters are known only on the cluster.
func (p *appProject) permits(dst destination) bool {
	matched := false
	for _, item := range p.Spec.Destinations {
		nameOK := dst.Name != "" && argoGlob(item.Name, dst.Name)
		serverOK := dst.Server != "" && argoGlob(item.Server, dst.Server)
		nsOK := argoGlob(item.Namespace, dst.Namespace)
		switch {
		case (serverOK || nameOK) && nsOK:
			matched = true
		case (!nameOK && isDeny(item.Name)) || (!serverOK && isDeny(item.Server)) && nsOK:
			return false
		case !nsOK && isDeny(item.Namespace) && serverOK:
			return false
		}
	}
	return matched
}

// permitsSource is Argo CD's AppProject.IsSourcePermitted (v3.5,
// app_project_types.go): globs with "/" as separator, deny patterns refuse.
// Argo CD also normalises git URLs; gvisorgen spells both sides itself.
func (p *appProject) permitsSource(repo string) bool {
	matched := false
	for _, pattern := range p.Spec.SourceRepos {
		if argoGlob(pattern, repo, '/') {
			matched = true
		} else if isDeny(pattern) {
			return false
		}
	}
	return matched
}

func isDeny(pattern string) bool { return strings.HasPrefix(pattern, "!") }

// argoGlob is Argo CD's globMatch with negation allowed (gobwas/glob, as its
// util/glob compiles them: destinations with no separator, sources with "/");
// a pattern that does not compile matches nothing, as there.
func argoGlob(pattern, val string, separators ...rune) bool {
	if isDeny(pattern) {
		return !globMatch(pattern[1:], val, separators...)
	}
	if pattern == "*" {
		return true
	}
	return globMatch(pattern, val, separators...)
}

func globMatch(pattern, val string, separators ...rune) bool {
	g, err := glob.Compile(pattern, separators...)
	return err == nil && g.Match(val)
}
