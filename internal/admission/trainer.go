package admission

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainerv1alpha1 "github.com/kiln-ml/kiln/api/trainer.kubeflow.org/v1alpha1"
	"github.com/kiln-ml/kiln/internal/controller/trainjob"
)

// trainerHooks admit Kubeflow Trainer's kinds: TrainJobs (checked against the runtime they name,
// read with runtimes when given) and the runtimes (Trainer's rules for their steps). A
// TrainingRuntime's pods and a TrainJob's patches give their pods what the requester must hold.
func trainerHooks(runtimes client.Reader) []hook {
	gv := trainerv1alpha1.GroupVersion
	return []hook{{
		gvk: gv.WithKind(trainerv1alpha1.TrainJobKind), resource: "trainjobs",
		new: func() client.Object { return &trainerv1alpha1.TrainJob{} },
		validate: func(ctx context.Context, obj, old client.Object) (field.ErrorList, []string) {
			var was *trainerv1alpha1.TrainJob
			if old != nil {
				was = old.(*trainerv1alpha1.TrainJob)
			}
			return validateTrainJob(ctx, runtimes, obj.(*trainerv1alpha1.TrainJob), was), nil
		},
		grants: func(obj client.Object) []grant { return trainJobGrants(obj.(*trainerv1alpha1.TrainJob)) },
	}, {
		gvk: gv.WithKind(trainerv1alpha1.TrainingRuntimeKind), resource: "trainingruntimes",
		new: func() client.Object { return &trainerv1alpha1.TrainingRuntime{} },
		validate: func(_ context.Context, obj, _ client.Object) (field.ErrorList, []string) {
			return validateRuntime(&obj.(*trainerv1alpha1.TrainingRuntime).Spec), nil
		},
		grants: func(obj client.Object) []grant { return runtimeGrants(&obj.(*trainerv1alpha1.TrainingRuntime).Spec) },
	}, {
		gvk: gv.WithKind(trainerv1alpha1.ClusterTrainingRuntimeKind), resource: "clustertrainingruntimes",
		new: func() client.Object { return &trainerv1alpha1.ClusterTrainingRuntime{} },
		validate: func(_ context.Context, obj, _ client.Object) (field.ErrorList, []string) {
			return validateRuntime(&obj.(*trainerv1alpha1.ClusterTrainingRuntime).Spec), nil
		},
	}}
}

// stepContainers is the container each step of a runtime must have (Trainer's rule).
var stepContainers = map[string]string{
	trainjob.StepTrainer: trainjob.ContainerNode, trainjob.StepDataset: trainjob.StepDataset, trainjob.StepModel: trainjob.StepModel,
}

// validateRuntime: a step is one Job with its step's container, as Trainer requires.
func validateRuntime(spec *trainerv1alpha1.TrainingRuntimeSpec) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("spec", "template", "spec", "replicatedJobs")
	for i, rj := range spec.Template.Spec.ReplicatedJobs {
		step := rj.Template.Labels[trainjob.LabelAncestorStep]
		want, ok := stepContainers[step]
		if !ok {
			continue
		}
		if rj.Replicas != 0 && rj.Replicas != 1 {
			errs = append(errs, field.Invalid(path.Index(i).Child("replicas"), rj.Replicas, fmt.Sprintf("must be 1: the %s step is one Job", step)))
		}
		if !slices.ContainsFunc(rj.Template.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == want }) {
			errs = append(errs, field.Required(path.Index(i).Child("template", "spec", "template", "spec", "containers"),
				fmt.Sprintf("the %s step needs a container named %s: name its container so", step, want)))
		}
	}
	return errs
}

// validateTrainJob checks what the CRD cannot: the patches' managers and containers, their
// changes while the run runs, and, against the runtime it names, the framework's own variables
// and the patches' replicated jobs. A runtime that does not exist yet is no error: the TrainJob
// waits for it and says so.
func validateTrainJob(ctx context.Context, runtimes client.Reader, job, old *trainerv1alpha1.TrainJob) field.ErrorList {
	errs := dns1035Name(job.Name, 0, "")
	patches := field.NewPath("spec", "runtimePatches")
	for i, p := range job.Spec.RuntimePatches {
		at := patches.Index(i)
		for _, msg := range utilvalidation.IsDomainPrefixedPath(at.Child("manager"), p.Manager) {
			errs = append(errs, msg)
		}
		errs = append(errs, patchEnv(p, at)...)
	}
	if old != nil && !ptr.Deref(old.Spec.Suspend, false) && !ptr.Deref(job.Spec.Suspend, false) && !samePatches(old.Spec.RuntimePatches, job.Spec.RuntimePatches) {
		errs = append(errs, field.Forbidden(patches, "can change only while the TrainJob is suspended (before or after this update): its JobSet runs with the patches it started with"))
	}
	if runtimes == nil {
		return errs
	}
	rt, p, err := trainjob.Runtime(ctx, runtimes, job)
	if err != nil || p.Reason != "" {
		if p.Reason == trainerv1alpha1.TrainJobRuntimeNotSupportedReason {
			errs = append(errs, field.Invalid(field.NewPath("spec", "runtimeRef"), job.Spec.RuntimeRef.Name, p.Message))
		}
		return errs // a missing runtime, or one kiln cannot read now: the controller says it
	}
	if t := job.Spec.Trainer; t != nil {
		reserved := trainjob.ReservedEnv(rt)
		for i, e := range t.Env {
			if slices.Contains(reserved, e.Name) {
				errs = append(errs, field.Invalid(field.NewPath("spec", "trainer", "env").Index(i).Child("name"), e.Name,
					fmt.Sprintf("is set by kiln for the runtime's framework (it sets %v): remove it", reserved)))
			}
		}
	}
	if _, p := trainjob.DesiredJobSet(job, rt); p.Reason != "" {
		at := p.Field
		if at == "" {
			at = "spec.runtimeRef"
		}
		errs = append(errs, &field.Error{Type: field.ErrorTypeInvalid, Field: at, BadValue: field.OmitValueType{}, Detail: p.Message})
	}
	return errs
}

// patchEnv: a patch sets no variables of the training and initializer containers, whose
// variables the TrainJob's trainer and initializer fields and the framework set (Trainer's rule).
func patchEnv(p trainerv1alpha1.RuntimePatch, at *field.Path) field.ErrorList {
	var errs field.ErrorList
	for j, rp := range patchedJobs(p) {
		ps := podSpecPatch(rp)
		if ps == nil {
			continue
		}
		for k, c := range ps.Containers {
			if len(c.Env) > 0 && slices.Contains([]string{trainjob.ContainerNode, trainjob.StepDataset, trainjob.StepModel}, c.Name) {
				errs = append(errs, field.Forbidden(at.Child("trainingRuntimeSpec", "template", "spec", "replicatedJobs").Index(j).Child("template", "spec", "template", "spec", "containers").Index(k).Child("env"),
					fmt.Sprintf("sets variables of container %s: set them in spec.trainer.env or spec.initializer instead", c.Name)))
			}
		}
	}
	return errs
}

func patchedJobs(p trainerv1alpha1.RuntimePatch) []trainerv1alpha1.ReplicatedJobPatch {
	if t := p.TrainingRuntimeSpec; t != nil && t.Template != nil && t.Template.Spec != nil {
		return t.Template.Spec.ReplicatedJobs
	}
	return nil
}

func podSpecPatch(rp trainerv1alpha1.ReplicatedJobPatch) *trainerv1alpha1.PodSpecPatch {
	if t := rp.Template; t != nil && t.Spec != nil && t.Spec.Template != nil {
		return t.Spec.Template.Spec
	}
	return nil
}

// samePatches compares patches but their times (the time of a rewritten patch moves alone).
func samePatches(a, b []trainerv1alpha1.RuntimePatch) bool {
	strip := func(ps []trainerv1alpha1.RuntimePatch) []trainerv1alpha1.RuntimePatch {
		out := make([]trainerv1alpha1.RuntimePatch, len(ps))
		for i, p := range ps {
			p.Time = nil
			out[i] = p
		}
		return out
	}
	return equality.Semantic.DeepEqual(strip(a), strip(b))
}

// trainJobGrants are what a TrainJob gives its pods: Secrets in the trainer's and initializers'
// variables, and what its patches give (a ServiceAccount, volumes, privileges).
func trainJobGrants(job *trainerv1alpha1.TrainJob) []grant {
	spec := field.NewPath("spec")
	var out []grant
	if t := job.Spec.Trainer; t != nil {
		out = append(out, envGrants(t.Env, nil, spec.Child("trainer"))...)
	}
	if in := job.Spec.Initializer; in != nil {
		if d := in.Dataset; d != nil {
			out = append(out, initializerGrants(d.Env, d.SecretRef, spec.Child("initializer", "dataset"))...)
		}
		if m := in.Model; m != nil {
			out = append(out, initializerGrants(m.Env, m.SecretRef, spec.Child("initializer", "model"))...)
		}
	}
	for i, p := range job.Spec.RuntimePatches {
		for j, rp := range patchedJobs(p) {
			ps := podSpecPatch(rp)
			if ps == nil {
				continue
			}
			pod := corev1.PodSpec{ServiceAccountName: ptr.Deref(ps.ServiceAccountName, ""), Volumes: ps.Volumes, SecurityContext: ps.SecurityContext}
			for _, c := range ps.InitContainers {
				pod.InitContainers = append(pod.InitContainers, corev1.Container{Name: c.Name, Env: c.Env, SecurityContext: c.SecurityContext})
			}
			for _, c := range ps.Containers {
				pod.Containers = append(pod.Containers, corev1.Container{Name: c.Name, Env: c.Env, SecurityContext: c.SecurityContext})
			}
			out = append(out, podGrants(&pod, spec.Child("runtimePatches").Index(i).Child("trainingRuntimeSpec", "template", "spec", "replicatedJobs").Index(j).Child("template", "spec", "template", "spec"))...)
		}
	}
	sortGrants(out)
	return out
}

// initializerGrants: an initializer's variables, and its secretRef (which becomes its envFrom).
func initializerGrants(env []corev1.EnvVar, ref *corev1.LocalObjectReference, path *field.Path) []grant {
	out := envGrants(env, nil, path)
	if ref != nil {
		out = append(out, grant{path.Child("secretRef"), fmt.Sprintf("reads Secret %q", ref.Name)})
	}
	return out
}

// runtimeGrants are what a TrainingRuntime's replicated jobs give their pods (its TrainJobs'
// pods are made from them).
func runtimeGrants(spec *trainerv1alpha1.TrainingRuntimeSpec) []grant {
	var out []grant
	path := field.NewPath("spec", "template", "spec", "replicatedJobs")
	for i := range spec.Template.Spec.ReplicatedJobs {
		rj := &spec.Template.Spec.ReplicatedJobs[i]
		out = append(out, podGrants(&rj.Template.Spec.Template.Spec, path.Index(i).Child("template", "spec", "template", "spec"))...)
	}
	sortGrants(out)
	return out
}
