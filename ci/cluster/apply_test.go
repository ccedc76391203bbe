//go:build clustertest

package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

const (
	fieldManager = "gvisorgen-e2e"
	syncWaveKey  = "argocd.argoproj.io/sync-wave"
)

// argoKindOrder is the order in which Argo CD applies the kinds of one sync wave (gitops-engine's kindOrder); other
// kinds come after these.
var argoKindOrder = []string{
	"Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange", "PodSecurityPolicy", "PodDisruptionBudget",
	"ServiceAccount", "Secret", "SecretList", "ConfigMap", "StorageClass", "PersistentVolume", "PersistentVolumeClaim",
	"CustomResourceDefinition", "ClusterRole", "ClusterRoleList", "ClusterRoleBinding", "ClusterRoleBindingList",
	"Role", "RoleList", "RoleBinding", "RoleBindingList", "Service", "DaemonSet", "Pod", "ReplicationController",
	"ReplicaSet", "Deployment", "HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress",
	"APIService",
}

// ReadObjects reads every object of the *.yaml files of a folder (multi-document files too), in file order.
func ReadObjects(dir string) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no *.yaml in %s", dir)
	}
	sort.Strings(files)
	var objs []*unstructured.Unstructured
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			var m map[string]any
			if err := d.Decode(&m); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if len(m) > 0 {
				objs = append(objs, &unstructured.Unstructured{Object: m})
			}
		}
	}
	return objs, nil
}

// SyncWave is an object's Argo CD sync wave (its annotation, 0 without one).
func SyncWave(o *unstructured.Unstructured) int {
	w, _ := strconv.Atoi(strings.TrimSpace(o.GetAnnotations()[syncWaveKey]))
	return w
}

func kindRank(kind string) int {
	for i, k := range argoKindOrder {
		if k == kind {
			return i
		}
	}
	return len(argoKindOrder)
}

// SortSyncOrder sorts objects as Argo CD syncs them: by sync wave, then kind, then name.
func SortSyncOrder(objs []*unstructured.Unstructured) {
	sort.SliceStable(objs, func(i, j int) bool {
		a, b := objs[i], objs[j]
		if wa, wb := SyncWave(a), SyncWave(b); wa != wb {
			return wa < wb
		}
		if ka, kb := kindRank(a.GetKind()), kindRank(b.GetKind()); ka != kb {
			return ka < kb
		}
		return a.GetName() < b.GetName()
	})
}

// ApplyDir applies a folder server side in Argo CD's order: wave by wave, each in kind order. Argo CD waits for a
// wave to be healthy before the next; here a Namespace is healthy once the controller-manager has made its default
// ServiceAccount, without which no Pod can be created in it, and a CRD once discovery serves its resource: a
// controller started on a kind discovery does not list yet exits ("no matches for kind": Flux's kustomize-controller,
// agent-sandbox's), and the API server's discovery lags the CRD's creation by up to a second or so under load.
func (c *Cluster) ApplyDir(ctx context.Context, dir string) error {
	objs, err := ReadObjects(dir)
	if err != nil {
		return err
	}
	SortSyncOrder(objs)
	var pending []*unstructured.Unstructured
	for i, o := range objs {
		if err := c.Apply(ctx, o); err != nil {
			return err
		}
		if awaited(o) {
			pending = append(pending, o)
		}
		if last := i == len(objs)-1; last || SyncWave(objs[i+1]) != SyncWave(o) || objs[i+1].GetKind() != o.GetKind() {
			for _, p := range pending {
				if err := c.waitHealthy(ctx, p); err != nil {
					return err
				}
			}
			pending = nil
		}
	}
	return nil
}

// awaited: the kinds whose next objects must wait for them (waitHealthy).
func awaited(o *unstructured.Unstructured) bool {
	k := o.GetKind()
	return k == "Namespace" || k == "CustomResourceDefinition"
}

// waitHealthy waits for what ApplyDir's next objects need of a Namespace or CRD it applied.
func (c *Cluster) waitHealthy(ctx context.Context, o *unstructured.Unstructured) error {
	if o.GetKind() == "Namespace" {
		return c.waitDefaultServiceAccount(ctx, o.GetName())
	}
	group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(o.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(o.Object, "spec", "versions")
	for _, v := range versions {
		vm, _ := v.(map[string]any)
		name, _, _ := unstructured.NestedString(vm, "name")
		if served, _, _ := unstructured.NestedBool(vm, "served"); !served || name == "" || group == "" || plural == "" {
			continue
		}
		gv := group + "/" + name
		err := Poll(ctx, 200*time.Millisecond, 60*time.Second, plural+"."+gv+" served", func(ctx context.Context) (bool, error) {
			l, err := c.Admin.Discovery().ServerResourcesForGroupVersion(gv)
			if err != nil {
				return false, nil
			}
			return slices.ContainsFunc(l.APIResources, func(r metav1.APIResource) bool { return r.Name == plural }), nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Apply applies one object server side (field manager gvisorgen-e2e, conflicts not forced).
func (c *Cluster) Apply(ctx context.Context, o *unstructured.Unstructured) error {
	if c.mapper == nil {
		dc, err := discovery.NewDiscoveryClientForConfig(c.RESTConfig(c.token))
		if err != nil {
			return err
		}
		c.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
		if c.dyn, err = dynamic.NewForConfig(c.RESTConfig(c.token)); err != nil {
			return err
		}
	}
	gvk := o.GroupVersionKind()
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		c.mapper.Reset() // a kind the cached discovery does not know yet (a CRD just applied)
		m, err = c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return fmt.Errorf("apply %s %s: %w", gvk.Kind, o.GetName(), err)
	}
	data, err := o.MarshalJSON()
	if err != nil {
		return err
	}
	var ri dynamic.ResourceInterface = c.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := o.GetNamespace()
		if ns == "" {
			ns = "default"
		}
		ri = c.dyn.Resource(m.Resource).Namespace(ns)
	}
	if _, err := ri.Patch(ctx, o.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: fieldManager}); err != nil {
		return fmt.Errorf("apply %s %s/%s: %w", gvk.Kind, o.GetNamespace(), o.GetName(), err)
	}
	return nil
}

func (c *Cluster) waitDefaultServiceAccount(ctx context.Context, ns string) error {
	return Poll(ctx, 200*time.Millisecond, 20*time.Second, "namespace "+ns+"'s default ServiceAccount", func(ctx context.Context) (bool, error) {
		_, err := c.Admin.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, err
	})
}
