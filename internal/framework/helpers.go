package framework

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
)

// ReplicaName is the name of the pod and of the headless service of one replica:
// "<job>-<lowercase replica type>-<index>", as Kubeflow names them.
func ReplicaName(jobName string, rtype kubeflowv1.ReplicaType, index int) string {
	n := jobName + "-" + strings.ToLower(string(rtype)) + "-" + strconv.Itoa(index)
	return strings.ReplaceAll(n, "/", "-")
}

// PodNameOf is the name of the pod and service of replica (rtype, index) under fw's naming.
func (fw Framework) PodNameOf(job Job, rtype kubeflowv1.ReplicaType, index int) string {
	if fw.PodName != nil {
		return fw.PodName(job, rtype, index)
	}
	return ReplicaName(job.GetName(), rtype, index)
}

// HasServices says whether job's replicas get headless services under fw.
func (fw Framework) HasServices(job Job) bool { return fw.Services == nil || fw.Services(job) }

// NumReplicas is spec.replicas, 1 when unset (the engine defaults it anyway).
func NumReplicas(spec *kubeflowv1.ReplicaSpec) int32 {
	if spec == nil {
		return 0
	}
	if spec.Replicas == nil {
		return 1
	}
	return *spec.Replicas
}

// TotalReplicas sums the replicas of every spec of the job, in 64 bits: a job stored before the
// CRDs bounded replicas may have types whose int32 sum would wrap.
func TotalReplicas(specs map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec) int64 {
	var n int64
	for _, s := range specs {
		n += int64(NumReplicas(s))
	}
	return n
}

// ContainerPort is the port named portName on the container named container in spec's template,
// or def when there is none.
func ContainerPort(spec *kubeflowv1.ReplicaSpec, container, portName string, def int32) int32 {
	if spec == nil {
		return def
	}
	for _, c := range spec.Template.Spec.Containers {
		if c.Name != container {
			continue
		}
		for _, p := range c.Ports {
			if p.Name == portName {
				return p.ContainerPort
			}
		}
	}
	return def
}

// AppendEnv appends env to every container of the template, or only to the container named
// only when only is not empty. User-set variables come first, as in Kubeflow.
func AppendEnv(t *corev1.PodTemplateSpec, only string, env ...corev1.EnvVar) {
	for i := range t.Spec.Containers {
		c := &t.Spec.Containers[i]
		if only != "" && c.Name != only {
			continue
		}
		c.Env = append(c.Env, env...)
		if only != "" {
			return
		}
	}
}

// Env is a shorthand for a plain name=value variable.
func Env(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }

// ValidateSingleMaster checks that a Master replica type, when present, has exactly one replica.
// It runs on defaulted jobs, where an omitted replicas is already 1 (DECISIONS #1).
func ValidateSingleMaster(specs map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec, path *field.Path) field.ErrorList {
	master := specs["Master"]
	if master == nil || NumReplicas(master) == 1 {
		return nil
	}
	return field.ErrorList{field.Forbidden(path.Key("Master").Child("replicas"), fmt.Sprintf("must be 1, not %d: a job has one master; add replicas to Worker instead", NumReplicas(master)))}
}

// MasterOrWorkers is the success rule PyTorch, Paddle and JAX share: a Master drives the job
// when the spec has one ("<Kind> <name> is running." / "is successfully completed."); otherwise
// the Workers do ("<Kind> <ns>/<name> is running." / "successfully completed."): all of them
// must succeed, or any one when anyWorkerSucceeds (elastic PyTorch).
func MasterOrWorkers(kind string, job Job, replicas Replicas, anyWorkerSucceeds bool) Outcome {
	if m, ok := replicas["Master"]; ok {
		switch {
		case m.Replicas > 0 && m.Succeeded >= m.Replicas:
			return Outcome{Succeeded: true, Message: fmt.Sprintf("%s %s is successfully completed.", kind, job.GetName())}
		case m.Active > 0:
			return Outcome{Running: true, Message: fmt.Sprintf("%s %s is running.", kind, job.GetName())}
		}
		return Outcome{}
	}
	key := job.GetNamespace() + "/" + job.GetName()
	w := replicas["Worker"]
	switch {
	case w.Replicas > 0 && w.Succeeded >= w.Replicas, anyWorkerSucceeds && w.Succeeded > 0:
		return Outcome{Succeeded: true, Message: fmt.Sprintf("%s %s successfully completed.", kind, key)}
	case w.Active > 0:
		return Outcome{Running: true, Message: fmt.Sprintf("%s %s is running.", kind, key)}
	}
	return Outcome{}
}

// DefaultElasticBounds fills an elastic policy's minReplicas and maxReplicas from each other, or
// both from the Worker replicas, as Kubeflow does.
func DefaultElasticBounds(minReplicas, maxReplicas **int32, workers int32) {
	switch {
	case *minReplicas == nil && *maxReplicas == nil:
		*minReplicas, *maxReplicas = ptr.To(workers), ptr.To(workers)
	case *minReplicas == nil:
		*minReplicas = ptr.To(**maxReplicas)
	case *maxReplicas == nil:
		*maxReplicas = ptr.To(**minReplicas)
	}
}
