//go:build clustertest

package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"cuelang.org/go/cue"

	"github.com/gvisorgen/gvisorgen/internal/eval"
)

// GKE's admission of critical pods, reproduced: GKE's API server limits pods of the critical priority classes with
// the ResourceQuota admission plugin's limitedResources, so a pod of such a class is admitted only in a namespace
// holding a ResourceQuota scoped to its class (kube-system has one, gcp-critical-pods), and refused elsewhere with
// "insufficient quota to match these scopes". Every e2e cluster runs with the same configuration: every scenario's
// installer pod is admitted only thanks to the generated quota, and scenario 2q shows the refusal without it.

// criticalClasses are the classes the configuration limits: the module's #CriticalPriorityClasses, the list the
// generator emits the quota for, read from the repository (one home).
var criticalClasses = sync.OnceValues(func() ([]string, error) {
	ev, err := eval.Load(eval.Options{Root: repoRoot})
	if err != nil {
		return nil, err
	}
	var l []string
	if err := ev.Instance().LookupPath(cue.ParsePath("#CriticalPriorityClasses")).Decode(&l); err != nil {
		return nil, fmt.Errorf("#CriticalPriorityClasses: %w", err)
	}
	return l, nil
})

// writeAdmissionConfig writes conf/admission.yaml, node.sh's --admission-control-config-file.
func (c *Cluster) writeAdmissionConfig() error {
	classes, err := criticalClasses()
	if err != nil {
		return err
	}
	y := fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ResourceQuota
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: ResourceQuotaConfiguration
    limitedResources:
    - resource: pods
      matchScopes:
      - scopeName: PriorityClass
        operator: In
        values: ["%s"]
`, strings.Join(classes, `", "`))
	return os.WriteFile(filepath.Join(c.Dir, "conf", "admission.yaml"), []byte(y), 0o644)
}
