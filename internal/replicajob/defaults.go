package replicajob

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
)

// Default fills in what a user may leave out. It runs in the defaulting webhook (persisted) and
// again in memory as the manager's cache receives each job (DefaultInCache), so behaviour is the
// same with or without webhooks (DECISIONS #1). cleanPodPolicy is the operator's default for
// runPolicy.cleanPodPolicy.
func Default(fw framework.Framework, job framework.Job, cleanPodPolicy kubeflowv1.CleanPodPolicy) {
	job.SetReplicaSpecs(canonicalTypes(fw, job.GetReplicaSpecs()))
	for _, spec := range job.GetReplicaSpecs() {
		if spec == nil {
			continue
		}
		if spec.Replicas == nil {
			one := int32(1)
			spec.Replicas = &one
		}
		if spec.RestartPolicy == "" {
			spec.RestartPolicy = fw.DefaultRestartPolicy
		}
		setDefaultPort(fw, &spec.Template.Spec)
	}
	if fw.Default != nil {
		fw.Default(job)
	}
	// After the framework's defaults: MPI's deprecated spec.cleanPodPolicy comes before kiln's.
	if rp := job.GetRunPolicy(); rp.CleanPodPolicy == nil {
		p := cleanPodPolicy
		rp.CleanPodPolicy = &p
	}
}

// canonicalTypes spells replica-type keys as the framework does ("worker" and "WORKER" become
// "Worker"); unknown types are kept as written, for validation to name them. Two keys that name
// one type ("Worker" and "worker") are both kept, the exact spelling (else the first in sorted
// order) as the type and the other as written, so that validation refuses the second rather
// than a map drop one of them at random.
func canonicalTypes(fw framework.Framework, specs map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec) map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec {
	if specs == nil {
		return nil
	}
	out := make(map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec, len(specs))
	keys := slices.SortedFunc(maps.Keys(specs), func(a, b kubeflowv1.ReplicaType) int {
		// Exact spellings first, then the rest in sorted order.
		return cmp.Or(cmp.Compare(rank(fw, a), rank(fw, b)), cmp.Compare(a, b))
	})
	for _, k := range keys {
		c := CanonicalType(fw, k)
		if _, taken := out[c]; taken {
			c = k
		}
		out[c] = specs[k]
	}
	return out
}

// rank orders a replica-type key for canonicalTypes: 0 when spelled as the framework does.
func rank(fw framework.Framework, rtype kubeflowv1.ReplicaType) int {
	if slices.Contains(fw.ReplicaTypes, rtype) {
		return 0
	}
	return 1
}

// CanonicalType is the framework's spelling of a replica type matched case-insensitively, or
// rtype itself when the framework has no such type.
func CanonicalType(fw framework.Framework, rtype kubeflowv1.ReplicaType) kubeflowv1.ReplicaType {
	for _, t := range fw.ReplicaTypes {
		if strings.EqualFold(string(t), string(rtype)) {
			return t
		}
	}
	return rtype
}

// setDefaultPort adds the framework's default port to the default container (or the first
// container when none has the default name) unless a port of that name exists.
func setDefaultPort(fw framework.Framework, spec *corev1.PodSpec) {
	idx := defaultContainerIndex(fw, spec)
	if idx < 0 || fw.DefaultPortName == "" {
		return
	}
	c := &spec.Containers[idx]
	for _, p := range c.Ports {
		if p.Name == fw.DefaultPortName {
			return
		}
	}
	c.Ports = append(c.Ports, corev1.ContainerPort{Name: fw.DefaultPortName, ContainerPort: fw.DefaultPort})
}

// DefaultInCache is the manager's cache transform of fw's jobs: each job is defaulted (and its
// managedFields dropped) once, as it arrives, and every reconcile plans the job as the cache keeps
// it. Defaulting a copy at every reconcile instead was a noticeable share of the bytes kiln
// allocated (a job is reconciled several times, each time copying its pod templates; measured:
// docs/performance.md, Measurements behind the code). The reconciler reads jobs only from this
// cache, and never changes one.
func DefaultInCache(fw framework.Framework, cleanPodPolicy kubeflowv1.CleanPodPolicy) func(any) (any, error) {
	return func(obj any) (any, error) {
		if job, ok := obj.(framework.Job); ok {
			job.SetManagedFields(nil)
			Default(fw, job, cleanPodPolicy)
		}
		return obj, nil
	}
}
