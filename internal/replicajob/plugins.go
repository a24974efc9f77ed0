package replicajob

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/gang"
	"github.com/kiln-ml/kiln/internal/kueue"
	"github.com/kiln-ml/kiln/internal/netpol"
)

// Plugin is a cluster feature that every job gets, whatever its framework: gang scheduling,
// network isolation, Kueue's queues. A plugin implements the parts it needs (the interfaces
// below, as Kubeflow Trainer's runtime plugins do), and the plan calls each part at its place.
type Plugin interface {
	// Name names the plugin in logs and errors.
	Name() string
}

// PodPlugin adds to the pod template of replica (rtype, index), after the framework's
// SetClusterSpec. It must be pure.
type PodPlugin interface {
	Plugin
	Pod(fw framework.Framework, job framework.Job, t *corev1.PodTemplateSpec, rtype kubeflowv1.ReplicaType, index int)
}

// ObjectPlugin builds objects a job needs beside its pods, as Framework.Extras does: applied,
// owned by the job, when wanted, deleted otherwise. It must be pure.
type ObjectPlugin interface {
	Plugin
	Objects(fw framework.Framework, job framework.Job, state framework.State) []framework.Extra
}

// GroupPlugin builds the object through which a job's pods are placed together (its gang
// group): applied before any pod while the job runs, deleted once it does not. Nil: the job's
// pods are placed one by one. It must be pure.
type GroupPlugin interface {
	Plugin
	Group(fw framework.Framework, job framework.Job) client.Object
}

// SuspendPlugin says what else holds a suspended job ("": nothing it knows of).
type SuspendPlugin interface {
	Plugin
	WhySuspended(job framework.Job) string
}

// plugins are the engine's plugins, in the order their parts run.
type plugins []Plugin

// pluginsFor are the plugins o turns on: gang scheduling with a backend, the network policy,
// and Kueue's queues (always: a queue label is all it reads).
func pluginsFor(o Options) plugins {
	var ps plugins
	if o.Gang != nil {
		ps = append(ps, gangScheduling{o.Gang})
	}
	return append(ps, networkPolicy{o.DefaultNetworkPolicy}, kueueQueues{})
}

func (ps plugins) pod(fw framework.Framework, job framework.Job, t *corev1.PodTemplateSpec, rtype kubeflowv1.ReplicaType, index int) {
	for _, p := range ps {
		if pp, ok := p.(PodPlugin); ok {
			pp.Pod(fw, job, t, rtype, index)
		}
	}
}

func (ps plugins) objects(fw framework.Framework, job framework.Job, state framework.State) []framework.Extra {
	var out []framework.Extra
	for _, p := range ps {
		if op, ok := p.(ObjectPlugin); ok {
			out = append(out, op.Objects(fw, job, state)...)
		}
	}
	return out
}

// group is the job's group under the first GroupPlugin that places it, or nil.
func (ps plugins) group(fw framework.Framework, job framework.Job) client.Object {
	for _, p := range ps {
		if gp, ok := p.(GroupPlugin); ok {
			if g := gp.Group(fw, job); g != nil {
				return g
			}
		}
	}
	return nil
}

func (ps plugins) whySuspended(job framework.Job) string {
	var why []string
	for _, p := range ps {
		if sp, ok := p.(SuspendPlugin); ok {
			if w := sp.WhySuspended(job); w != "" {
				why = append(why, w)
			}
		}
	}
	return strings.Join(why, "; ")
}

// gangScheduling places the pods of a job with more than one pod (or a schedulingPolicy)
// all-or-nothing, through its group under one backend.
type gangScheduling struct{ backend gang.Backend }

func (gangScheduling) Name() string { return "gang-scheduling" }

func (g gangScheduling) Pod(fw framework.Framework, job framework.Job, t *corev1.PodTemplateSpec, rtype kubeflowv1.ReplicaType, _ int) {
	if ganged(job) {
		g.backend.Decorate(t, gang.GroupName(job.GetName(), fw.Kind), strings.ToLower(string(rtype)))
	}
}

func (g gangScheduling) Group(fw framework.Framework, job framework.Job) client.Object {
	if !ganged(job) {
		return nil
	}
	return g.backend.Object(group(fw, job))
}

// networkPolicy gives an isolated job (its annotation or the operator's default) a NetworkPolicy
// that lets its pods reach each other and DNS only, and deletes it when the annotation says none;
// a job that says nothing under a default of none has none, and costs nothing.
type networkPolicy struct{ defaultMode string }

func (networkPolicy) Name() string { return "network-policy" }

func (n networkPolicy) Objects(fw framework.Framework, job framework.Job, _ framework.State) []framework.Extra {
	isolated := netpol.Mode(job.GetAnnotations(), n.defaultMode) == netpol.Isolated
	if !isolated && job.GetAnnotations()[netpol.Annotation] != netpol.None {
		return nil
	}
	np := netpol.ForJob(job.GetName(), job.GetNamespace(), jobLabels(fw, job), netpol.EgressOf(job.GetAnnotations()))
	return []framework.Extra{{Object: np, Wanted: isolated}}
}

// kueueQueues says that Kueue holds a suspended job it queues.
type kueueQueues struct{}

func (kueueQueues) Name() string { return "kueue" }

func (kueueQueues) WhySuspended(job framework.Job) string { return kueue.Waiting(job.GetLabels()) }
