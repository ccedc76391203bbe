package gen

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/gvisorgen/gvisorgen/internal/eval"
)

// appProject is what of the generated Argo CD AppProject decides whether
// it lets a target's Application sync.
type appProject struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		SourceRepos  []string `json:"sourceRepos"`
		Destinations []struct {
			Namespace string `json:"namespace"`
		} `json:"destinations"`
		ClusterResourceWhitelist   []groupKind `json:"clusterResourceWhitelist"`
		NamespaceResourceWhitelist []groupKind `json:"namespaceResourceWhitelist"`
	} `json:"spec"`
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
					Project string `json:"project"`
					Source  struct {
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
			if !slices.Contains(proj.Spec.SourceRepos, app.Spec.Source.RepoURL) {
				out = append(out, fmt.Sprintf("target %s: delivery.repoURL %s is not a source of the Argo CD project %s (%v): Argo CD would refuse the Application; use fleet.repoURL, or a project of your own (delivery.argocd.project)",
					t.Name, app.Spec.Source.RepoURL, proj.Metadata.Name, proj.Spec.SourceRepos))
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
	return out, nil
}
