// Authenticated metrics: the filter asks the apiserver who a caller is and whether it may read.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Package manager assembles kiln's controller manager: the scheme, a cache that holds only what
// kiln owns, and one replica-job reconciler per enabled framework.
package manager

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	"net/http"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
	"github.com/kiln-ml/kiln/internal/admission"
	"github.com/kiln-ml/kiln/internal/controller/inferenceservice"
	"github.com/kiln-ml/kiln/internal/controller/pyjob"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/framework/pytorch"
	"github.com/kiln-ml/kiln/internal/framework/tensorflow"
	"github.com/kiln-ml/kiln/internal/framework/xgboost"
	"github.com/kiln-ml/kiln/internal/metrics"
	"github.com/kiln-ml/kiln/internal/replicajob"
	"github.com/kiln-ml/kiln/internal/servingcert"
)

// Options are the manager's settings; cmd/kiln fills them from flags, tests directly.
type Options struct {
	MetricsAddr, ProbeAddr string
	// PprofAddr serves net/http/pprof when set (profiling a benchmark run).
	PprofAddr        string
	LeaderElection   bool
	LeaderElectionID string
	LeaderElectionNS string
	// Namespaces limits what kiln watches; empty means all namespaces.
	Namespaces []string
	// Kinds lists the enabled job kinds, lowercase (tfjob, pytorchjob, xgboostjob); empty: all.
	Kinds   []string
	Workers int
	Engine  replicajob.Options
	// ClusterDomain is appended to TF_CONFIG hosts (Kubeflow's CUSTOM_CLUSTER_DOMAIN).
	ClusterDomain string
	// PyTorchInitImage is the image of PyTorch workers' wait-for-master init container.
	PyTorchInitImage string
	// Logger is the manager's logger; default controller-runtime's global one.
	Logger logr.Logger
	// Serving configures the InferenceService controller.
	Serving inferenceservice.Options
	// Webhook configures the admission webhooks; Webhook.Port 0 serves none.
	Webhook WebhookOptions
	// SecureMetrics serves /metrics over HTTPS, to authenticated and authorized clients only.
	SecureMetrics bool
	// SkipNameValidation lets a process build more than one manager (tests that restart it).
	SkipNameValidation bool
}

// Frameworks returns the frameworks kiln serves, keyed by lowercase kind.
func Frameworks(o Options) map[string]framework.Framework {
	return map[string]framework.Framework{
		"tfjob":      tensorflow.New(tensorflow.Config{ClusterDomain: o.ClusterDomain}),
		"pytorchjob": pytorch.New(pytorch.Config{InitContainerImage: o.PyTorchInitImage}),
		"xgboostjob": xgboost.New(),
	}
}

// The --kinds names of the kinds with their own controller rather than a framework.
const (
	pyJobKind            = "pyjob"
	inferenceServiceKind = "inferenceservice"
)

// KindNames lists the kinds that --kinds accepts.
func KindNames() []string {
	names := []string{pyJobKind, inferenceServiceKind}
	for k := range Frameworks(Options{}) {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// Scheme knows the built-in kinds and every kind kiln serves.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(kubeflowv1.AddToScheme(s))
	utilruntime.Must(trainingv1alpha1.AddToScheme(s))
	utilruntime.Must(servingv1alpha1.AddToScheme(s))
	return s
}

// New builds the manager with a reconciler for every enabled kind.
func New(cfg *rest.Config, o Options) (ctrl.Manager, error) {
	frameworks, own, err := enabled(o)
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(metrics.CountRequests)
	scheme := Scheme()
	log := o.Logger
	if log.GetSink() == nil {
		log = ctrl.Log
	}
	metricsOpts := metricsserver.Options{BindAddress: o.MetricsAddr}
	if o.SecureMetrics {
		// Callers need a bearer token allowed to get the /metrics non-resource URL.
		metricsOpts.SecureServing, metricsOpts.FilterProvider = true, filters.WithAuthenticationAndAuthorization
	}
	opts := ctrl.Options{
		Scheme:                        scheme,
		Cache:                         cacheOptions(o.Namespaces, frameworks, own[pyJobKind]),
		Metrics:                       metricsOpts,
		HealthProbeBindAddress:        o.ProbeAddr,
		PprofBindAddress:              o.PprofAddr,
		LeaderElection:                o.LeaderElection,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionNamespace:       o.LeaderElectionNS,
		LeaderElectionReleaseOnCancel: true,
		Controller:                    config.Controller{SkipNameValidation: &o.SkipNameValidation},
		Logger:                        o.Logger,
	}
	var rotator *servingcert.Rotator
	if o.Webhook.Port != 0 {
		direct, err := client.New(cfg, client.Options{Scheme: scheme})
		if err != nil {
			return nil, err
		}
		if opts.WebhookServer, rotator, err = webhookServer(o.Webhook, direct, log); err != nil {
			return nil, err
		}
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	if len(frameworks) > 0 {
		if err := replicajob.IndexChildren(context.Background(), mgr.GetFieldIndexer()); err != nil {
			return nil, err
		}
	}
	for _, fw := range frameworks {
		r := replicajob.NewReconciler(mgr.GetClient(), fw, mgr.GetEventRecorder("kiln-"+strings.ToLower(fw.Kind)), clock.RealClock{}, o.Engine)
		if err := r.SetupWithManager(mgr, o.Workers); err != nil {
			return nil, fmt.Errorf("setting up the %s controller: %w", fw.Kind, err)
		}
	}
	if own[pyJobKind] {
		if err := pyjob.NewReconciler(mgr.GetClient(), clock.RealClock{}).SetupWithManager(mgr, o.Workers); err != nil {
			return nil, fmt.Errorf("setting up the PyJob controller: %w", err)
		}
	}
	if own[inferenceServiceKind] {
		r := inferenceservice.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), clock.RealClock{}, o.Serving)
		if err := r.SetupWithManager(mgr, o.Workers); err != nil {
			return nil, fmt.Errorf("setting up the InferenceService controller: %w", err)
		}
	}
	if o.Webhook.Port != 0 {
		admission.NewSet(scheme, admissionKinds(o, frameworks, own)).Register(mgr.GetWebhookServer())
		if rotator != nil {
			if err := mgr.Add(rotator); err != nil {
				return nil, err
			}
		}
		if err := mgr.AddReadyzCheck("webhooks", mgr.GetWebhookServer().StartedChecker()); err != nil {
			return nil, err
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("caches", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return fmt.Errorf("informer caches are not synced")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return mgr, nil
}

// Admission is the admission webhook set of the kinds o enables.
func Admission(o Options) (*admission.Set, error) {
	frameworks, own, err := enabled(o)
	if err != nil {
		return nil, err
	}
	return admission.NewSet(Scheme(), admissionKinds(o, frameworks, own)), nil
}

func admissionKinds(o Options, frameworks []framework.Framework, own map[string]bool) admission.Kinds {
	policy := o.Engine.DefaultCleanPodPolicy
	if policy == "" {
		policy = kubeflowv1.CleanPodPolicyRunning
	}
	return admission.Kinds{
		Frameworks: frameworks, CleanPodPolicy: policy,
		PyJobs: own[pyJobKind], InferenceServices: own[inferenceServiceKind],
	}
}

// enabled returns the frameworks of the enabled kinds, and which kinds with their own controller
// are enabled.
func enabled(o Options) ([]framework.Framework, map[string]bool, error) {
	all := Frameworks(o)
	kinds := o.Kinds
	if len(kinds) == 0 {
		kinds = KindNames()
	}
	var out []framework.Framework
	own := map[string]bool{}
	for _, k := range kinds {
		k = strings.ToLower(k)
		if k == pyJobKind || k == inferenceServiceKind {
			own[k] = true
			continue
		}
		fw, ok := all[k]
		if !ok {
			return nil, nil, fmt.Errorf("--kinds: unknown kind %q: use any of %s", k, strings.Join(KindNames(), ", "))
		}
		out = append(out, fw)
	}
	return out, own, nil
}

// keepPodStatus is what kiln reads of a pod, and all the cache keeps of it: identity, labels,
// owner, deletion; the completion-index annotation (PyJob); the phase, an unschedulable
// PodScheduled condition (PyJob), and each container's name, restart count and how it ended.
// kiln never writes a pod it read, so nothing else is needed.
func keepPodStatus(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Pod{TypeMeta: pod.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
		CreationTimestamp: pod.CreationTimestamp, DeletionTimestamp: pod.DeletionTimestamp,
		Labels: pod.Labels, OwnerReferences: pod.OwnerReferences,
	}, Status: corev1.PodStatus{Phase: pod.Status.Phase}}
	if idx, ok := pod.Annotations[batchv1.JobCompletionIndexAnnotation]; ok {
		slim.Annotations = map[string]string{batchv1.JobCompletionIndexAnnotation: idx}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			slim.Status.Conditions = append(slim.Status.Conditions, corev1.PodCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message})
		}
	}
	slim.Status.ContainerStatuses = slimContainers(pod.Status.ContainerStatuses)
	slim.Status.InitContainerStatuses = slimContainers(pod.Status.InitContainerStatuses)
	return slim, nil
}

func slimContainers(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	if len(in) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(in))
	for i, s := range in {
		out[i] = corev1.ContainerStatus{Name: s.Name, RestartCount: s.RestartCount}
		if t := s.State.Terminated; t != nil {
			out[i].State.Terminated = &corev1.ContainerStateTerminated{ExitCode: t.ExitCode, Reason: t.Reason}
		}
	}
	return out
}

// keepServiceMeta is what kiln reads of a service: its metadata (the retry history annotations).
func keepServiceMeta(obj any) (any, error) {
	if svc, ok := obj.(*corev1.Service); ok {
		svc.ManagedFields, svc.Spec = nil, corev1.ServiceSpec{}
	}
	return obj, nil
}

// cacheOptions keep the informers small: pods and services only when they carry the
// operator-name label of an enabled kind (DECISIONS #12), batch Jobs and claims only when they
// carry a PyJob's name, no managedFields on anything, and pods and services without the specs
// kiln never reads.
func cacheOptions(namespaces []string, frameworks []framework.Framework, pyJobs bool) cache.Options {
	names := make([]string, 0, len(frameworks)+1)
	for _, fw := range frameworks {
		names = append(names, fw.ControllerName)
	}
	if pyJobs {
		names = append(names, pyjob.ControllerName)
	}
	slices.Sort(names)
	req, err := labels.NewRequirement(kubeflowv1.LabelOperatorName, selection.In, names)
	if err != nil {
		panic(err) // controller names are constants and valid label values
	}
	owned := labels.NewSelector().Add(*req)
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
			&corev1.Pod{}:     {Label: owned, Transform: keepPodStatus},
			&corev1.Service{}: {Label: owned, Transform: keepServiceMeta},
			&batchv1.Job{}:    ofPyJob, &corev1.PersistentVolumeClaim{}: ofPyJob,
			&appsv1.Deployment{}: ofService, &autoscalingv2.HorizontalPodAutoscaler{}: ofService,
		},
		DefaultTransform: cache.TransformStripManagedFields(),
	}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}
