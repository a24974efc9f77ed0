package manager

import (
	"slices"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	kservev1alpha1 "github.com/kiln-ml/kiln/api/serving.kserve.io/v1alpha1"
	trainerv1alpha1 "github.com/kiln-ml/kiln/api/trainer.kubeflow.org/v1alpha1"
	"github.com/kiln-ml/kiln/internal/controller/inferenceservice"
	"github.com/kiln-ml/kiln/internal/controller/pyjob"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/replicajob"
	"github.com/kiln-ml/kiln/internal/stuck"
	"github.com/kiln-ml/kiln/internal/watchtrim"
)

// keepPodStatus is what kiln reads of a pod, and all the cache keeps of it: identity, the
// labels kiln reads (keepLabels), owner, deletion; the completion-index annotation (PyJob), the
// retry count pods of kinds without services carry (replicajob.AnnotationRestarts) and the mark
// of a pod others wait for; the
// phase, an unschedulable PodScheduled condition, a true Ready one of a pod others wait for
// (replicajob.AnnotationReadinessAwaited), and each container's name, restart count, how it
// ended and a waiting reason that blocks it (stuck.Blocking). kiln never writes a pod it read,
// so nothing else is needed. The pod is the informer's freshly decoded one and is slimmed
// in place: a new one per event was a noticeable share of the bytes kiln allocated (measured:
// docs/performance.md, Measurements behind the code).
func keepPodStatus(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	awaited := pod.Annotations[replicajob.AnnotationReadinessAwaited] == "true"
	var annotations map[string]string
	for _, a := range []string{batchv1.JobCompletionIndexAnnotation, replicajob.AnnotationRestarts, replicajob.AnnotationReadinessAwaited} {
		if v, ok := pod.Annotations[a]; ok {
			if annotations == nil {
				annotations = map[string]string{}
			}
			annotations[a] = v
		}
	}
	pod.ObjectMeta = metav1.ObjectMeta{
		Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
		CreationTimestamp: pod.CreationTimestamp, DeletionTimestamp: pod.DeletionTimestamp,
		Labels: keepLabels(pod.Labels), Annotations: annotations, OwnerReferences: pod.OwnerReferences,
	}
	pod.Spec = corev1.PodSpec{}
	var conditions []corev1.PodCondition
	for _, c := range pod.Status.Conditions {
		switch {
		case c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse:
			conditions = append(conditions, corev1.PodCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message})
		case c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && awaited:
			// Replicas that wait for this one to be ready (Framework.WaitsFor) read it.
			conditions = append(conditions, corev1.PodCondition{Type: c.Type, Status: c.Status})
		}
	}
	pod.Status = corev1.PodStatus{Phase: pod.Status.Phase, Conditions: conditions,
		ContainerStatuses:     slimContainers(pod.Status.ContainerStatuses),
		InitContainerStatuses: slimContainers(pod.Status.InitContainerStatuses)}
	return pod, nil
}

// slimContainers keeps, in place, what keepPodStatus says of each container.
func slimContainers(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	if len(in) == 0 {
		return nil
	}
	for i, s := range in {
		slim := stuck.Slim(s)
		slim.RestartCount = s.RestartCount
		if t := s.State.Terminated; t != nil {
			*t = corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Reason: t.Reason}
			slim.State.Terminated = t
		}
		in[i] = slim
	}
	return in
}

// stripManagedFieldsAndJobSets drops every cached object's managedFields, and a JobSet's pod
// templates (keepJobSetSummary).
func stripManagedFieldsAndJobSets(obj any) (any, error) {
	if _, ok := obj.(*jobsetv1alpha2.JobSet); ok {
		return keepJobSetSummary(obj)
	}
	return stripManagedFields(obj)
}

var stripManagedFields = cache.TransformStripManagedFields()

// keepJobSetSummary is what kiln reads of a cached JobSet (a TrainJob's): its metadata, its
// suspension, its replicated jobs' names and counts, and its status; the pod templates, the
// bulk of it, and their dependencies are dropped (its watch events arrive without them:
// jsonCuts). kiln never writes a JobSet from what it read but a merge patch of its suspension
// (the rest it applies from what it built).
func keepJobSetSummary(obj any) (any, error) {
	js, ok := obj.(*jobsetv1alpha2.JobSet)
	if !ok {
		return obj, nil
	}
	js.ManagedFields = nil
	for i := range js.Spec.ReplicatedJobs {
		rj := &js.Spec.ReplicatedJobs[i]
		rj.Template = batchv1.JobTemplateSpec{}
		rj.DependsOn = nil
	}
	return js, nil
}

// keepDeploymentSummary is what kiln reads of a cached Deployment (an InferenceService's): all
// but its managedFields and its pod template's spec, the bulk of it (the template's labels and
// annotations say which model and revision it runs). kiln never writes a Deployment from what it
// read; the one read of a template's spec (KServe's canaryTrafficPercent keeping the pods rolled
// out before) goes to the apiserver.
func keepDeploymentSummary(obj any) (any, error) {
	if d, ok := obj.(*appsv1.Deployment); ok {
		d.ManagedFields, d.Spec.Template.Spec = nil, corev1.PodSpec{}
	}
	return obj, nil
}

// keepServiceMeta is what kiln reads of a service: its metadata (the retry history annotations).
func keepServiceMeta(obj any) (any, error) {
	if svc, ok := obj.(*corev1.Service); ok {
		svc.ManagedFields, svc.Spec = nil, corev1.ServiceSpec{}
		svc.Labels = keepLabels(svc.Labels)
	}
	return obj, nil
}

// keepLabels is what kiln reads of a cached pod's or service's labels: the replica type and
// index (the engine groups a job's children by them), or the PyJob's name (PyJob lists its
// pods by it). Every child of the same replica type and index shares one map: with many pods
// and services the labels were a large share of the cache (measured: docs/performance.md,
// Measurements behind the code), and cached objects are only read (readOnly: no reader changes them).
func keepLabels(l map[string]string) map[string]string {
	if name, ok := l[pyjob.LabelPyJob]; ok {
		return map[string]string{pyjob.LabelPyJob: name}
	}
	rtype, ok := l[kubeflowv1.LabelReplicaType]
	if !ok {
		return nil
	}
	return replicaLabels.get(rtype, l[kubeflowv1.LabelReplicaIndex])
}

// replicaLabels are the label maps shared by cached children: one per replica type and index
// seen, up to sharedLabelsLimit; children past that get maps of their own.
var replicaLabels = sharedLabels{sets: map[[2]string]map[string]string{}, limit: sharedLabelsLimit}

// sharedLabelsLimit bounds the shared maps (about 200 bytes each): a few replica types times the
// indexes of the largest jobs, with room to spare. Without it, every index ever seen (a job of a
// million workers, replica types of every spelling) would stay in memory for good.
const sharedLabelsLimit = 16384

type sharedLabels struct {
	mu    sync.Mutex
	sets  map[[2]string]map[string]string
	limit int
}

func (s *sharedLabels) get(rtype, index string) map[string]string {
	key := [2]string{rtype, index}
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.sets[key]
	if !ok {
		l = map[string]string{kubeflowv1.LabelReplicaType: rtype, kubeflowv1.LabelReplicaIndex: index}
		if len(s.sets) < s.limit {
			s.sets[key] = l
		}
	}
	return l
}

// specless are the kinds whose spec and managedFields the cache drops (keepPodStatus,
// keepServiceMeta): the cache's watches receive them trimmed (watchtrim).
var specless = []schema.GroupVersionKind{corev1.SchemeGroupVersion.WithKind("Pod"), corev1.SchemeGroupVersion.WithKind("Service")}

// jsonCuts are the members of custom resources, besides managedFields, that the cache drops
// (keepJobSetSummary): the cache's watches receive them trimmed (watchtrim).
var jsonCuts = map[schema.GroupResource][]watchtrim.Cut{
	jobsetv1alpha2.GroupVersion.WithResource("jobsets").GroupResource(): {
		{"spec", "replicatedJobs", "*", "template"}, {"spec", "replicatedJobs", "*", "dependsOn"},
	},
}

// trimWatches gives the cache its connection to the apiserver: cfg's, whose watch events come
// without what decoding them would only throw away (the spec and managedFields of pods and
// services, the managedFields of custom resources, a JobSet's templates), and informers that
// decode the JSON ones in one pass (watchtrim.ForCache).
func trimWatches(opts *cache.Options, cfg *rest.Config) error {
	return watchtrim.ForCache(opts, cfg, specless, jsonCuts)
}

// readOnly turns off the deep copy of cached objects on every Get and List, for the kinds whose
// readers never change what they read in place: pods and services (kiln reads them and writes
// objects of its own building), the kubeflow.org jobs (the cache defaults them as they arrive,
// replicajob.DefaultInCache; the engine plans from them and writes statuses as patches without
// touching the job it read), and the runtimes of KServe and of Trainer (every reconcile of a
// KServe InferenceService lists them all, and kserve.Build copies what it takes: copying them was
// a sixth of the bytes kiln allocated serving KServe's InferenceServices; every reconcile of a
// TrainJob reads its runtime, and trainjob.DesiredJobSet copies the template). A job's
// reconcile reads the job and lists its children every time it runs; in a burst of jobs the
// copies were a large share of the bytes kiln allocated (measured: docs/performance.md,
// Measurements behind the code). What a Get or List returns is a shallow copy: its
// maps, slices and pointers are the cache's, and must not be changed.
var readOnly = true

// noOperator selects nothing: the label both set and not.
func noOperator() labels.Selector {
	set, _ := labels.NewRequirement(kubeflowv1.LabelOperatorName, selection.Exists, nil)
	unset, _ := labels.NewRequirement(kubeflowv1.LabelOperatorName, selection.DoesNotExist, nil)
	return labels.NewSelector().Add(*set, *unset)
}

// cacheOptions keep the informers small: pods and services only when they carry the
// operator-name label of an enabled kind (DECISIONS #12), batch Jobs, claims and ConfigMaps only
// when they carry a PyJob's name, no managedFields on anything, and pods and services without the specs
// kiln never reads. own is the kinds kiln serves (--kinds).
func cacheOptions(namespaces []string, frameworks []framework.Framework, own map[string]bool, cleanPodPolicy kubeflowv1.CleanPodPolicy) cache.Options {
	pyJobs := own[pyJobKind]
	names := make([]string, 0, len(frameworks)+1)
	for _, fw := range frameworks {
		names = append(names, fw.ControllerName)
	}
	if pyJobs {
		names = append(names, pyjob.ControllerName)
	}
	slices.Sort(names)
	owned := noOperator()
	if len(names) > 0 { // none: only kinds of their own controllers (--kinds=inferenceservice)
		req, err := labels.NewRequirement(kubeflowv1.LabelOperatorName, selection.In, names)
		if err != nil {
			panic(err) // controller names are constants and valid label values
		}
		owned = labels.NewSelector().Add(*req)
	}
	hasPyJob, err := labels.NewRequirement(pyjob.LabelPyJob, selection.Exists, nil)
	if err != nil {
		panic(err)
	}
	ofPyJob := cache.ByObject{Label: labels.NewSelector().Add(*hasPyJob)}
	hasService, err := labels.NewRequirement(inferenceservice.LabelService, selection.Exists, nil)
	if err != nil {
		panic(err)
	}
	ofService := cache.ByObject{Label: labels.NewSelector().Add(*hasService)}
	opts := cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:     {Label: owned, Transform: keepPodStatus, UnsafeDisableDeepCopy: &readOnly},
			&corev1.Service{}: {Label: owned, Transform: keepServiceMeta, UnsafeDisableDeepCopy: &readOnly},
			&batchv1.Job{}:    ofPyJob, &corev1.PersistentVolumeClaim{}: ofPyJob, &corev1.ConfigMap{}: ofPyJob, &networkingv1.NetworkPolicy{}: ofPyJob,
			&appsv1.Deployment{}: {Label: ofService.Label, Transform: keepDeploymentSummary}, &autoscalingv2.HorizontalPodAutoscaler{}: ofService,
		},
		// JobSets get their transform here, not in ByObject: a ByObject entry needs the kind
		// served when the manager starts, and kiln starts without JobSet installed.
		DefaultTransform: stripManagedFieldsAndJobSets,
	}
	for _, fw := range frameworks {
		opts.ByObject[fw.NewJob()] = cache.ByObject{Transform: replicajob.DefaultInCache(fw, cleanPodPolicy), UnsafeDisableDeepCopy: &readOnly}
	}
	// A ByObject entry needs its kind served when the manager starts: each kind's runtimes only
	// when kiln serves the kind.
	if own[kserveInferenceServiceKind] {
		opts.ByObject[&kservev1alpha1.ServingRuntime{}] = cache.ByObject{UnsafeDisableDeepCopy: &readOnly}
		opts.ByObject[&kservev1alpha1.ClusterServingRuntime{}] = cache.ByObject{UnsafeDisableDeepCopy: &readOnly}
	}
	if own[trainJobKind] {
		opts.ByObject[&trainerv1alpha1.TrainingRuntime{}] = cache.ByObject{UnsafeDisableDeepCopy: &readOnly}
		opts.ByObject[&trainerv1alpha1.ClusterTrainingRuntime{}] = cache.ByObject{UnsafeDisableDeepCopy: &readOnly}
	}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}
