package admission

import (
	"context"
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/netpol"
	"github.com/kiln-ml/kiln/internal/replicajob"
)

// Kinds says which kinds a set admits.
type Kinds struct {
	Frameworks []framework.Framework
	// CleanPodPolicy is the operator's default for runPolicy.cleanPodPolicy.
	CleanPodPolicy    kubeflowv1.CleanPodPolicy
	PyJobs            bool
	InferenceServices bool
	// TrainJobs admits TrainJobs and training runtimes; Runtimes reads the runtimes a TrainJob
	// names (nil: the checks that need its runtime are left to the controller).
	TrainJobs bool
	Runtimes  client.Reader
	// PodRights, when set, refuses what would give a requester who may not create pods in the
	// namespace more than their own rights through kiln's pods (rights.go); nil: no such check.
	PodRights PodRights
}

// NewSet returns the admission of the given kinds. PyJob and InferenceService defaults live in
// their CRD schemas, so the apiserver applies them with or without webhooks: they get no
// mutating webhook.
func NewSet(scheme *runtime.Scheme, k Kinds) *Set {
	var hooks []hook
	for _, fw := range k.Frameworks {
		hooks = append(hooks, trainingJobHook(fw, k.CleanPodPolicy))
	}
	if k.PyJobs {
		hooks = append(hooks, hook{
			gvk: trainingv1alpha1.GroupVersion.WithKind("PyJob"), resource: "pyjobs",
			new: func() client.Object { return &trainingv1alpha1.PyJob{} },
			validate: func(_ context.Context, obj, _ client.Object) (field.ErrorList, []string) {
				job := obj.(*trainingv1alpha1.PyJob)
				return validatePyJob(job), pyJobWarnings(job)
			},
			grants: func(obj client.Object) []grant { return pyJobGrants(obj.(*trainingv1alpha1.PyJob)) },
		})
	}
	if k.InferenceServices {
		hooks = append(hooks, hook{
			gvk: servingv1alpha1.GroupVersion.WithKind("InferenceService"), resource: "inferenceservices",
			new: func() client.Object { return &servingv1alpha1.InferenceService{} },
			validate: func(_ context.Context, obj, _ client.Object) (field.ErrorList, []string) {
				return validateInferenceService(obj.(*servingv1alpha1.InferenceService)), nil
			},
			grants: func(obj client.Object) []grant {
				return inferenceServiceGrants(obj.(*servingv1alpha1.InferenceService))
			},
		})
	}
	if k.TrainJobs {
		hooks = append(hooks, trainerHooks(k.Runtimes)...)
	}
	return newSet(scheme, hooks, k.PodRights)
}

// trainingJobHook persists the engine's defaults (DECISIONS #1) and checks the Kubeflow rules.
func trainingJobHook(fw framework.Framework, cleanPodPolicy kubeflowv1.CleanPodPolicy) hook {
	return hook{
		gvk: kubeflowv1.GroupVersion.WithKind(fw.Kind), resource: strings.ToLower(fw.Kind) + "s",
		new:      func() client.Object { return fw.NewJob() },
		defaults: func(obj client.Object) { replicajob.Default(fw, obj.(framework.Job), cleanPodPolicy) },
		grants:   func(obj client.Object) []grant { return trainingJobGrants(fw, obj.(framework.Job)) },
		validate: func(_ context.Context, obj, old client.Object) (field.ErrorList, []string) {
			// Validate what the engine will run: the defaulted job, as the reconciler does.
			job := obj.DeepCopyObject().(framework.Job)
			replicajob.Default(fw, job, cleanPodPolicy)
			var was framework.Job
			if old != nil {
				was = old.(framework.Job)
			}
			return replicajob.Validate(fw, job, was)
		},
	}
}

// PyJob names become a batch Job, its pods' job-name label and a headless Service.
func validatePyJob(job *trainingv1alpha1.PyJob) field.ErrorList {
	errs := dns1035Name(job.Name, 0, "")
	spec := field.NewPath("spec")
	if strings.ContainsAny(job.Spec.Image, " \t\n") {
		errs = append(errs, field.Invalid(spec.Child("image"), job.Spec.Image, "must not contain spaces: an image reference such as ghcr.io/org/train:1.0"))
	}
	errs = append(errs, validateEnv(job.Spec.Env, spec)...)
	errs = append(errs, metav1validation.ValidateLabels(job.Spec.NodeSelector, spec.Child("nodeSelector"))...)
	errs = append(errs, netpol.Validate(job.Annotations)...)
	// The CRD compares the paths as written; the container runtime mounts them cleaned.
	if s := job.Spec; s.OutputPath != "" && s.DatasetPath != "" && path.Clean(s.OutputPath) == path.Clean(s.DatasetPath) {
		errs = append(errs, field.Invalid(spec.Child("outputPath"), s.OutputPath, fmt.Sprintf("must differ from spec.datasetPath (%s): the data and the results each get their own directory", s.DatasetPath)))
	}
	return errs
}

// pyJobWarnings are legal PyJobs that may not do what their author expects.
func pyJobWarnings(job *trainingv1alpha1.PyJob) []string {
	s := job.Spec
	if s.Output != nil && s.Output.Size != nil && s.Output.ReclaimPolicy == trainingv1alpha1.OutputDelete && s.TTLSecondsAfterFinished != nil {
		return []string{fmt.Sprintf("spec.output.reclaimPolicy Delete with spec.ttlSecondsAfterFinished: the output claim and its results are deleted %d s after the run finishes; set reclaimPolicy: Retain to keep them", *s.TTLSecondsAfterFinished)}
	}
	return nil
}

// InferenceService names become Deployments and Services named <name>-predictor[-canary].
func validateInferenceService(isvc *servingv1alpha1.InferenceService) field.ErrorList {
	errs := dns1035Name(isvc.Name, len("-predictor-canary"), "its canary Service is named <name>-predictor-canary")
	r, path := isvc.Spec.Resources, field.NewPath("spec", "resources")
	if r.CPURequest != nil && r.CPULimit != nil && r.CPURequest.Cmp(*r.CPULimit) > 0 {
		errs = append(errs, field.Invalid(path.Child("cpuRequest"), r.CPURequest.String(), fmt.Sprintf("must not exceed spec.resources.cpuLimit (%s)", r.CPULimit)))
	}
	if r.MemoryRequest != nil && r.MemoryLimit != nil && r.MemoryRequest.Cmp(*r.MemoryLimit) > 0 {
		errs = append(errs, field.Invalid(path.Child("memoryRequest"), r.MemoryRequest.String(), fmt.Sprintf("must not exceed spec.resources.memoryLimit (%s)", r.MemoryLimit)))
	}
	if t := isvc.Spec.Traffic; t != nil && t.CanaryVersion == isvc.Spec.ModelURI {
		errs = append(errs, field.Invalid(field.NewPath("spec", "traffic", "canaryVersion"), t.CanaryVersion, "must differ from spec.modelUri: it names the new model to try"))
	}
	if np := isvc.Spec.NetworkPolicy; np != nil {
		errs = append(errs, netpol.ValidatePeers(np.From, field.NewPath("spec", "networkPolicy", "from"))...)
	}
	if pod, path := isvc.Spec.Pod, field.NewPath("spec", "pod"); pod != nil {
		// They go to the Deployment's pod template as they are: the apiserver would refuse it.
		errs = append(errs, metav1validation.ValidateLabels(pod.Labels, path.Child("labels"))...)
		errs = append(errs, validation.ValidateAnnotations(pod.Annotations, path.Child("annotations"))...)
		errs = append(errs, metav1validation.ValidateLabels(pod.NodeSelector, path.Child("nodeSelector"))...)
		errs = append(errs, replicajob.ValidateEnvNames(pod.Env, pod.EnvFrom, path)...)
	}
	return errs
}

// dns1035Name checks that name is a DNS-1035 label that stays one with a suffix of the given
// length appended.
func dns1035Name(name string, suffix int, why string) field.ErrorList {
	path := field.NewPath("metadata", "name")
	var errs field.ErrorList
	for _, msg := range validation.NameIsDNS1035Label(name, false) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	if limit := utilvalidation.DNS1035LabelMaxLength - suffix; suffix > 0 && len(name) > limit {
		errs = append(errs, field.Invalid(path, name, fmt.Sprintf("must be at most %d characters: %s", limit, why)))
	}
	return errs
}

// validateEnv checks a PyJob's env at path.env: names a container may have, each once.
func validateEnv(env []corev1.EnvVar, path *field.Path) field.ErrorList {
	errs := replicajob.ValidateEnvNames(env, nil, path)
	seen := map[string]bool{}
	for i, e := range env {
		if seen[e.Name] {
			errs = append(errs, field.Duplicate(path.Child("env").Index(i).Child("name"), e.Name))
		}
		seen[e.Name] = true
	}
	return errs
}
