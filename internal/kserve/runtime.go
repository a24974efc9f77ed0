package kserve

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kservev1alpha1 "github.com/kiln-ml/kiln/api/serving.kserve.io/v1alpha1"
	kservev1beta1 "github.com/kiln-ml/kiln/api/serving.kserve.io/v1beta1"
)

// Runtime is a ServingRuntime or ClusterServingRuntime as the picker sees it.
type Runtime struct {
	Name string
	// Cluster is true for a ClusterServingRuntime.
	Cluster bool
	// Created orders runtimes of the same protocol rank: the newest first.
	Created metav1.Time
	// Annotations of the runtime object (serving.kserve.io/server-type names its server).
	Annotations map[string]string
	Spec        kservev1alpha1.ServingRuntimeSpec
}

// Namespaced and Clustered are the runtimes of lists, as the picker sees them.
func Namespaced(rs []kservev1alpha1.ServingRuntime) []Runtime {
	out := make([]Runtime, 0, len(rs))
	for i := range rs {
		out = append(out, Runtime{Name: rs[i].Name, Created: rs[i].CreationTimestamp, Annotations: rs[i].Annotations, Spec: rs[i].Spec})
	}
	return out
}

// Clustered: see Namespaced.
func Clustered(rs []kservev1alpha1.ClusterServingRuntime) []Runtime {
	out := make([]Runtime, 0, len(rs))
	for i := range rs {
		out = append(out, Runtime{Name: rs[i].Name, Cluster: true, Created: rs[i].CreationTimestamp, Annotations: rs[i].Annotations, Spec: rs[i].Spec})
	}
	return out
}

// Pick is the runtime that serves model m, by KServe's rules. A runtime the model names is looked
// up in the namespace, then in the cluster, and must be enabled, speak the model's protocol (when
// the model gives one) and list its format. Otherwise the runtimes that are enabled, single-model,
// single-node, speak the model's protocol (v1 when unset) and list its format with autoSelect are
// candidates: the namespace's before the cluster's, each ordered by the format's priority (set
// before unset, higher first), then by the lowest protocol they speak (v1 first), the newest,
// and the name. Where KServe leaves ties of priority in no set order, kiln keeps that order.
// The error is a *Failure.
func Pick(m *kservev1beta1.ModelSpec, namespaced, cluster []Runtime) (Runtime, error) {
	if m.Runtime != nil {
		return named(m, *m.Runtime, namespaced, cluster)
	}
	proto := protocolOf(m)
	var found []Runtime
	for _, rs := range [][]Runtime{namespaced, cluster} {
		var ok []Runtime
		for _, r := range rs {
			if !disabled(r.Spec) && !multiModel(r.Spec) && r.Spec.WorkerSpec == nil && speaks(r.Spec, proto) && lists(r.Spec, m.ModelFormat, true) {
				ok = append(ok, r)
			}
		}
		slices.SortStableFunc(ok, func(a, b Runtime) int {
			return cmp.Or(byPriority(a.Spec, b.Spec, m.ModelFormat.Name), cmp.Compare(lowestProtocol(a.Spec), lowestProtocol(b.Spec)),
				b.Created.Time.Compare(a.Created.Time), strings.Compare(a.Name, b.Name))
		})
		found = append(found, ok...)
	}
	if len(found) == 0 {
		return Runtime{}, &Failure{kservev1beta1.NoSupportingRuntime, fmt.Sprintf(
			"no runtime serves model format %s with protocol %s: no enabled, single-model ServingRuntime of the namespace or ClusterServingRuntime lists the format with autoSelect: true; install one (kiln's install has KServe's runtimes) or name one in spec.predictor.model.runtime",
			formatOf(m.ModelFormat), proto)}
	}
	return found[0], nil
}

// named is the runtime the model names, or why it cannot serve the model.
func named(m *kservev1beta1.ModelSpec, name string, namespaced, cluster []Runtime) (Runtime, error) {
	i := slices.IndexFunc(namespaced, func(r Runtime) bool { return r.Name == name })
	var r Runtime
	switch j := slices.IndexFunc(cluster, func(r Runtime) bool { return r.Name == name }); {
	case i >= 0:
		r = namespaced[i]
	case j >= 0:
		r = cluster[j]
	default:
		return Runtime{}, &Failure{kservev1beta1.RuntimeNotRecognized, fmt.Sprintf(
			"spec.predictor.model.runtime: no ServingRuntime %q in the namespace and no ClusterServingRuntime %q; waiting for it to be created", name, name)}
	}
	kind := r.kind()
	switch {
	case disabled(r.Spec):
		return Runtime{}, &Failure{kservev1beta1.RuntimeDisabled, fmt.Sprintf(
			"spec.predictor.model.runtime: %s %s is disabled (spec.disabled); enable it or name another runtime", kind, name)}
	case m.ProtocolVersion != nil && !speaks(r.Spec, *m.ProtocolVersion):
		return Runtime{}, &Failure{kservev1beta1.NoSupportingRuntime, fmt.Sprintf(
			"spec.predictor.model.protocolVersion: %s %s does not speak %s (it speaks %s); change the protocol or the runtime", kind, name, *m.ProtocolVersion, protocols(r.Spec))}
	case !lists(r.Spec, m.ModelFormat, false):
		return Runtime{}, &Failure{kservev1beta1.NoSupportingRuntime, fmt.Sprintf(
			"spec.predictor.model.modelFormat: %s %s does not serve model format %s; name a runtime that lists it in spec.supportedModelFormats", kind, name, formatOf(m.ModelFormat))}
	}
	return r, nil
}

// Protocol is the protocol the model is served with: its own, else the lowest the runtime speaks
// (v1 before v2 before grpc-v1 before grpc-v2); empty when neither says.
func Protocol(m *kservev1beta1.ModelSpec, r Runtime) kservev1alpha1.Protocol {
	if m.ProtocolVersion != nil {
		return *m.ProtocolVersion
	}
	if rank := lowestProtocol(r.Spec); rank < len(protocolRank) {
		return protocolRank[rank]
	}
	return ""
}

func (r Runtime) kind() string {
	if r.Cluster {
		return "ClusterServingRuntime"
	}
	return "ServingRuntime"
}

func disabled(s kservev1alpha1.ServingRuntimeSpec) bool { return s.Disabled != nil && *s.Disabled }
func multiModel(s kservev1alpha1.ServingRuntimeSpec) bool {
	return s.MultiModel != nil && *s.MultiModel
}

// speaks says whether a runtime speaks protocol p; one that lists none speaks every protocol.
func speaks(s kservev1alpha1.ServingRuntimeSpec, p kservev1alpha1.Protocol) bool {
	return len(s.ProtocolVersions) == 0 || slices.Contains(s.ProtocolVersions, p)
}

func protocols(s kservev1alpha1.ServingRuntimeSpec) string {
	out := make([]string, len(s.ProtocolVersions))
	for i, p := range s.ProtocolVersions {
		out[i] = string(p)
	}
	return strings.Join(out, ", ")
}

// lists says whether a runtime lists format f (and its version, when f has one), counting only the
// formats with autoSelect when autoSelected.
func lists(s kservev1alpha1.ServingRuntimeSpec, f kservev1beta1.ModelFormat, autoSelected bool) bool {
	for _, sf := range s.SupportedModelFormats {
		if autoSelected && (sf.AutoSelect == nil || !*sf.AutoSelect) {
			continue
		}
		if sf.Name == f.Name && (f.Version == nil || (sf.Version != nil && *sf.Version == *f.Version)) {
			return true
		}
	}
	return false
}

// byPriority orders runtimes by the priority of the format's first entry: set before unset,
// higher first.
func byPriority(a, b kservev1alpha1.ServingRuntimeSpec, format string) int {
	pa, pb := priority(a, format), priority(b, format)
	switch {
	case pa == nil && pb == nil:
		return 0
	case pa == nil:
		return 1
	case pb == nil:
		return -1
	}
	return cmp.Compare(*pb, *pa)
}

func priority(s kservev1alpha1.ServingRuntimeSpec, format string) *int32 {
	for _, sf := range s.SupportedModelFormats {
		if sf.Name == format {
			return sf.Priority
		}
	}
	return nil
}

// protocolRank orders the protocols as KServe ranks them.
var protocolRank = []kservev1alpha1.Protocol{kservev1alpha1.ProtocolV1, kservev1alpha1.ProtocolV2, kservev1alpha1.ProtocolGRPCV1, kservev1alpha1.ProtocolGRPCV2}

// lowestProtocol is the rank of the lowest protocol a runtime speaks; len(protocolRank) when it
// lists none or none known.
func lowestProtocol(s kservev1alpha1.ServingRuntimeSpec) int {
	lowest := len(protocolRank)
	for _, p := range s.ProtocolVersions {
		if i := slices.Index(protocolRank, p); i >= 0 && i < lowest {
			lowest = i
		}
	}
	return lowest
}

func formatOf(f kservev1beta1.ModelFormat) string {
	if f.Version != nil {
		return f.Name + " version " + *f.Version
	}
	return f.Name
}
