package vet

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	storagev1 "k8s.io/api/storage/v1"

	"cuelang.org/go/cue"
)

// Problem is one rule an object breaks that its typed CUE schema (#Objects)
// cannot state cleanly: a rule across fields (the selector and the template's
// labels, unique names, a mount and its volume, a request and its limit, ...)
// or, when Policy is set, one of gvisorgen's own policies.
type Problem struct {
	// Path is the field the problem is about: map keys (string) and list
	// indexes (int), e.g. spec, template, spec, containers, 0, name.
	Path []any
	Msg  string
	// Policy names the gvisorgen policy broken (see Policies), or "".
	Policy string
}

// PathString prints the path the way CUE errors print theirs
// (spec.template.spec.containers.0.name, metadata.labels."a/b").
func (p Problem) PathString() string { return pathString(p.Path) }

var identifier = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*$`)

func pathString(path []any) string {
	var parts []string
	for _, s := range path {
		switch s := s.(type) {
		case string:
			if !identifier.MatchString(s) {
				s = strconv.Quote(s)
			}
			parts = append(parts, s)
		case int:
			parts = append(parts, strconv.Itoa(s))
		}
	}
	return strings.Join(parts, ".")
}

func (p Problem) String() string {
	s := p.PathString() + ": " + p.Msg
	if p.Policy != "" {
		s = p.PathString() + ": gvisorgen policy " + p.Policy + ": " + p.Msg +
			" (policy, not schema: a target can waive it with policy.waive." + p.Policy + ": <reason> in its committed values)"
	}
	return s
}

func cuePath(path []any) cue.Path {
	var sels []cue.Selector
	for _, s := range path {
		switch s := s.(type) {
		case string:
			sels = append(sels, cue.Str(s))
		case int:
			sels = append(sels, cue.Index(s))
		}
	}
	return cue.MakePath(sels...)
}

// Check runs the cross-field rules and the policies on one object (its JSON)
// whose type has already been validated. Kinds without rules return nothing.
func Check(f Facts, apiVersion, kind string, data []byte) []Problem {
	c := checker{facts: f}
	var meta struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if json.Unmarshal(data, &meta) == nil {
		c.annotations(p("metadata", "annotations"), meta.Metadata.Annotations)
	}
	switch apiVersion + "/" + kind {
	case "apps/v1/DaemonSet":
		var o appsv1.DaemonSet
		if json.Unmarshal(data, &o) != nil {
			return nil
		}
		c.daemonSet(&o)
	case "v1/Pod":
		var o corev1.Pod
		if json.Unmarshal(data, &o) != nil {
			return nil
		}
		c.podSpec(p("spec"), &o.Spec)
	case "node.k8s.io/v1/RuntimeClass":
		var o nodev1.RuntimeClass
		if json.Unmarshal(data, &o) != nil {
			return nil
		}
		if o.Scheduling != nil {
			c.tolerations(p("scheduling", "tolerations"), o.Scheduling.Tolerations)
		}
		c.runtimeClassPolicy(&o)
	case "storage.k8s.io/v1/StorageClass":
		var o storagev1.StorageClass
		if json.Unmarshal(data, &o) != nil {
			return nil
		}
		c.storageClassPolicy(&o)
	case "source.toolkit.fluxcd.io/v1/OCIRepository":
		var o struct {
			Spec struct {
				Verify map[string]any `json:"verify"`
			} `json:"spec"`
		}
		if json.Unmarshal(data, &o) != nil {
			return nil
		}
		c.ociRepositoryPolicy(o.Spec.Verify)
	}
	return c.out
}

type checker struct {
	facts Facts
	out   []Problem
}

func (c *checker) add(path []any, format string, args ...any) {
	c.out = append(c.out, Problem{Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (c *checker) policy(id string, path []any, format string, args ...any) {
	if _, ok := Policies[id]; !ok {
		panic("vet: unknown policy " + id)
	}
	c.out = append(c.out, Problem{Path: path, Msg: fmt.Sprintf(format, args...), Policy: id})
}

// p builds a path; at appends steps to a copy of one.
func p(steps ...any) []any { return steps }

func at(base []any, steps ...any) []any {
	return append(append([]any{}, base...), steps...)
}

// maxAnnotationsBytes is the API server's limit on the keys and values of all
// annotations of an object together.
const maxAnnotationsBytes = 256 * 1024

func (c *checker) annotations(path []any, a map[string]string) {
	total, largest, largestKey := 0, 0, ""
	for k, v := range a {
		n := len(k) + len(v)
		total += n
		if n > largest || n == largest && k < largestKey {
			largest, largestKey = n, k
		}
	}
	if total > maxAnnotationsBytes {
		c.add(path, "the annotations take %d bytes in all (keys and values): the API server allows at most %d (256 KiB); the largest is %q (%d bytes)",
			total, maxAnnotationsBytes, largestKey, largest)
	}
}

func (c *checker) daemonSet(o *appsv1.DaemonSet) {
	tmpl := o.Spec.Template.Labels
	sel := o.Spec.Selector
	switch {
	case sel == nil:
		c.add(p("spec", "selector"), "required: the DaemonSet's selector must match the pod template's labels (spec.template.metadata.labels)")
	case len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0:
		c.add(p("spec", "selector"), "empty: a DaemonSet's selector must select its pod template's labels (spec.template.metadata.labels)")
	default:
		keys := make([]string, 0, len(sel.MatchLabels))
		for k := range sel.MatchLabels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := sel.MatchLabels[k]
			if got, ok := tmpl[k]; !ok {
				c.add(p("spec", "selector", "matchLabels", k), "selects %s=%s, but the pod template has no label %s (spec.template.metadata.labels): the selector must match the template's labels", k, v, k)
			} else if got != v {
				c.add(p("spec", "selector", "matchLabels", k), "selects %s=%s, but the pod template's label is %s=%s (spec.template.metadata.labels): the selector must match the template's labels", k, v, k, got)
			}
		}
		for i, e := range sel.MatchExpressions {
			path := p("spec", "selector", "matchExpressions", i)
			v, has := tmpl[e.Key]
			in := false
			for _, x := range e.Values {
				in = in || x == v
			}
			ok := true
			switch string(e.Operator) {
			case "In":
				ok = has && in
			case "NotIn":
				ok = !has || !in
			case "Exists":
				ok = has
			case "DoesNotExist":
				ok = !has
			}
			if !ok {
				c.add(path, "%s %s %v does not match the pod template's labels (spec.template.metadata.labels)", e.Key, e.Operator, e.Values)
			}
		}
	}

	s := o.Spec.UpdateStrategy
	if (s.Type == "" || s.Type == appsv1.RollingUpdateDaemonSetStrategyType) && s.RollingUpdate != nil {
		ru := s.RollingUpdate
		unavailable, surge := 1, 0 // the API server's defaults
		if ru.MaxUnavailable != nil {
			unavailable = intOrPercent(ru.MaxUnavailable.String())
		}
		if ru.MaxSurge != nil {
			surge = intOrPercent(ru.MaxSurge.String())
		}
		if unavailable == 0 && surge == 0 {
			c.add(p("spec", "updateStrategy", "rollingUpdate", "maxUnavailable"), "cannot be 0 when maxSurge is 0 (or unset): the rollout could never replace a pod")
		}
	}
	c.podSpec(p("spec", "template", "spec"), &o.Spec.Template.Spec)
}

func intOrPercent(s string) int {
	n, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
	if err != nil {
		return -1
	}
	return n
}

// probeHandlers are the fields of a probe that say how to probe.
var probeHandlers = "exec, httpGet, tcpSocket or grpc"

func (c *checker) podSpec(base []any, s *corev1.PodSpec) {
	defer c.images(base, s) // the policy last
	c.tolerations(at(base, "tolerations"), s.Tolerations)

	volumes := map[string]int{}
	for i, v := range s.Volumes {
		if j, dup := volumes[v.Name]; dup {
			c.add(at(base, "volumes", i, "name"), "duplicate volume name %q (also volumes.%d): volume names must be unique", v.Name, j)
			continue
		}
		volumes[v.Name] = i
	}

	type ctr struct {
		field string
		i     int
		c     *corev1.Container
	}
	var all []ctr
	for i := range s.InitContainers {
		all = append(all, ctr{"initContainers", i, &s.InitContainers[i]})
	}
	for i := range s.Containers {
		all = append(all, ctr{"containers", i, &s.Containers[i]})
	}
	names := map[string]string{}
	for _, x := range all {
		cb := at(base, x.field, x.i)
		where := fmt.Sprintf("%s.%d", x.field, x.i)
		if prev, dup := names[x.c.Name]; dup && x.c.Name != "" {
			c.add(at(cb, "name"), "duplicate container name %q (also %s): the names of containers and init containers must be unique together", x.c.Name, prev)
		} else {
			names[x.c.Name] = where
		}
		mounts := map[string]int{}
		for j, m := range x.c.VolumeMounts {
			if _, ok := volumes[m.Name]; !ok {
				c.add(at(cb, "volumeMounts", j, "name"), "volume %q not found: a mount must name one of the pod's volumes (spec.volumes%s)", m.Name, volumeList(s.Volumes))
			}
			if k, dup := mounts[m.MountPath]; dup {
				c.add(at(cb, "volumeMounts", j, "mountPath"), "%q is already mounted (volumeMounts.%d): mount paths must be unique", m.MountPath, k)
			} else {
				mounts[m.MountPath] = j
			}
		}
		c.resources(at(cb, "resources"), &x.c.Resources)
		init := x.field == "initContainers"
		sidecar := x.c.RestartPolicy != nil && *x.c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		if !init && x.c.RestartPolicy != nil {
			c.add(at(cb, "restartPolicy"), "may only be set on an init container (a sidecar)")
		}
		for _, pr := range []struct {
			name  string
			probe *corev1.Probe
		}{{"livenessProbe", x.c.LivenessProbe}, {"readinessProbe", x.c.ReadinessProbe}, {"startupProbe", x.c.StartupProbe}} {
			if pr.probe == nil {
				continue
			}
			pb := at(cb, pr.name)
			if init && !sidecar {
				c.add(pb, "not allowed on an init container (without restartPolicy: Always): it runs to completion and is never probed")
				continue
			}
			var set []string
			h := pr.probe.ProbeHandler
			if h.Exec != nil {
				set = append(set, "exec")
			}
			if h.HTTPGet != nil {
				set = append(set, "httpGet")
			}
			if h.TCPSocket != nil {
				set = append(set, "tcpSocket")
			}
			if h.GRPC != nil {
				set = append(set, "grpc")
			}
			switch {
			case len(set) == 0:
				c.add(pb, "no handler: a probe needs exactly one of %s", probeHandlers)
			case len(set) > 1:
				c.add(at(pb, set[1]), "a probe takes exactly one handler, this one has %s", strings.Join(set, " and "))
			}
			if pr.name != "readinessProbe" && pr.probe.SuccessThreshold > 1 {
				c.add(at(pb, "successThreshold"), "must be 1 for a %s", pr.name)
			}
		}
	}
}

func volumeList(vs []corev1.Volume) string {
	if len(vs) == 0 {
		return ": there are none"
	}
	var names []string
	for _, v := range vs {
		names = append(names, v.Name)
	}
	return ": " + strings.Join(names, ", ")
}

func (c *checker) tolerations(base []any, ts []corev1.Toleration) {
	for i, t := range ts {
		tb := at(base, i)
		if t.Key == "" && t.Operator != corev1.TolerationOpExists {
			op := string(t.Operator)
			if op == "" {
				op = "Equal (the default)"
			}
			c.add(at(tb, "operator"), "%s without a key: a toleration without a key matches every taint and must use operator Exists", op)
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			eff := string(t.Effect)
			if eff == "" {
				eff = "unset (every effect)"
			}
			c.add(at(tb, "tolerationSeconds"), "only applies to effect NoExecute, but effect is %s", eff)
		}
	}
}

// overcommitAllowed says whether a request may be below its limit: not for
// huge pages and extended resources (example.com/gpu), whose request must
// equal the limit.
func overcommitAllowed(name string) bool {
	if strings.HasPrefix(name, corev1.ResourceHugePagesPrefix) {
		return false
	}
	return !strings.Contains(name, "/") || strings.Contains(name, "kubernetes.io/")
}

func (c *checker) resources(base []any, r *corev1.ResourceRequirements) {
	names := func(l corev1.ResourceList) []string {
		var out []string
		for k := range l {
			out = append(out, string(k))
		}
		sort.Strings(out)
		return out
	}
	for _, n := range names(r.Requests) {
		req := r.Requests[corev1.ResourceName(n)]
		lim, hasLim := r.Limits[corev1.ResourceName(n)]
		switch {
		case !overcommitAllowed(n) && !hasLim:
			c.add(at(base, "requests", n), "%s needs a limit equal to its request (%s cannot be overcommitted): set resources.limits.%s", n, n, n)
		case !overcommitAllowed(n) && req.Cmp(lim) != 0:
			c.add(at(base, "requests", n), "%s must equal its limit (limits.%s: %s): %s cannot be overcommitted", req.String(), n, lim.String(), n)
		case hasLim && req.Cmp(lim) > 0:
			c.add(at(base, "requests", n), "%s is above its limit (limits.%s: %s): a request must be less than or equal to its limit", req.String(), n, lim.String())
		}
	}
	huge := false
	for _, l := range []corev1.ResourceList{r.Requests, r.Limits} {
		for n := range l {
			huge = huge || strings.HasPrefix(string(n), corev1.ResourceHugePagesPrefix)
		}
	}
	if huge {
		_, rc := r.Requests[corev1.ResourceCPU]
		_, rm := r.Requests[corev1.ResourceMemory]
		_, lc := r.Limits[corev1.ResourceCPU]
		_, lm := r.Limits[corev1.ResourceMemory]
		if !rc && !rm && !lc && !lm {
			c.add(base, "huge pages need a cpu or memory request or limit too")
		}
	}
}
