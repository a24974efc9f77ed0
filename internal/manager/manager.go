// Authenticated metrics: the filter asks the apiserver who a caller is and whether it may read.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Package manager assembles kiln's controller manager: the scheme, a cache that holds only what
// kiln owns, and one replica-job reconciler per enabled framework.
package manager

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmanager "sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	kubeflowv2beta1 "github.com/kiln-ml/kiln/api/kubeflow.org/v2beta1"
	kservev1alpha1 "github.com/kiln-ml/kiln/api/serving.kserve.io/v1alpha1"
	kservev1beta1 "github.com/kiln-ml/kiln/api/serving.kserve.io/v1beta1"
	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
	servingv1beta1 "github.com/kiln-ml/kiln/api/serving/v1beta1"
	trainerv1alpha1 "github.com/kiln-ml/kiln/api/trainer.kubeflow.org/v1alpha1"
	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
	trainingv1beta1 "github.com/kiln-ml/kiln/api/training/v1beta1"
	"github.com/kiln-ml/kiln/internal/admission"
	"github.com/kiln-ml/kiln/internal/controller/inferenceservice"
	"github.com/kiln-ml/kiln/internal/controller/pyjob"
	"github.com/kiln-ml/kiln/internal/controller/trainjob"
	"github.com/kiln-ml/kiln/internal/conversion"
	"github.com/kiln-ml/kiln/internal/events"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/framework/jax"
	"github.com/kiln-ml/kiln/internal/framework/mpi"
	"github.com/kiln-ml/kiln/internal/framework/paddle"
	"github.com/kiln-ml/kiln/internal/framework/pytorch"
	"github.com/kiln-ml/kiln/internal/framework/tensorflow"
	"github.com/kiln-ml/kiln/internal/framework/xgboost"
	"github.com/kiln-ml/kiln/internal/gang"
	"github.com/kiln-ml/kiln/internal/metrics"
	"github.com/kiln-ml/kiln/internal/ondemand"
	"github.com/kiln-ml/kiln/internal/replicajob"
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
	// Kinds lists the enabled job kinds, lowercase (tfjob, pytorchjob, xgboostjob, jaxjob, …); empty: all.
	Kinds []string
	// KServe serves KServe's InferenceService (kserve-inferenceservice) beside Kinds.
	KServe  bool
	Workers int
	Engine  replicajob.Options
	// GangSchedulerName chooses gang scheduling (Kubeflow's --gang-scheduler-name): "" uses the
	// PodGroups Kubernetes serves when it does (scheduling.k8s.io/v1beta1), none otherwise;
	// "none", "native", "volcano", "scheduler-plugins", or the name of a scheduler running
	// scheduler-plugins' coscheduling.
	GangSchedulerName string
	// ClusterDomain is appended to TF_CONFIG hosts (Kubeflow's CUSTOM_CLUSTER_DOMAIN).
	ClusterDomain string
	// PyTorchInitImage is the image of PyTorch workers' wait-for-master init container, and of
	// MPIJob launchers' kubectl-delivery one (both kiln's).
	PyTorchInitImage string
	// MPIRemoteStart is the MPIJob remote start of jobs that name none: ssh (default) or
	// kubectl-exec (which needs the mpi-kubectl-exec RBAC).
	MPIRemoteStart string
	// Frameworks are served beside the built-in ones: kubeflow.org/v1 kinds of a program that
	// embeds kiln's manager (their CRDs installed). Each is checked as the built-in ones are.
	Frameworks []framework.Framework
	// Logger is the manager's logger; default controller-runtime's global one.
	Logger logr.Logger
	// Serving configures the InferenceService controller.
	Serving inferenceservice.Options
	// Webhook configures the admission webhooks; Webhook.Port 0 serves none.
	Webhook WebhookOptions
	// SecureMetrics serves /metrics over HTTPS, to authenticated and authorized clients only.
	SecureMetrics bool
	// EnableHTTP2 lets the webhook and metrics servers speak HTTP/2; off, they speak HTTP/1.1 only
	// (HTTP/2's stream handling has had denial-of-service flaws, such as Rapid Reset).
	EnableHTTP2 bool
	// SkipNameValidation lets a process build more than one manager (tests that restart it).
	SkipNameValidation bool
}

// builtIn are the frameworks kiln ships: a new framework is its package and one line here.
func builtIn(o Options) []framework.Framework {
	return []framework.Framework{
		tensorflow.New(tensorflow.Config{ClusterDomain: o.ClusterDomain}),
		pytorch.New(pytorch.Config{InitContainerImage: o.PyTorchInitImage}),
		xgboost.New(),
		jax.New(),
		paddle.New(),
		mpi.New(mpi.Config{RemoteStart: o.MPIRemoteStart, KubectlImage: o.PyTorchInitImage}),
	}
}

// Frameworks is the set of frameworks kiln serves: the built-in ones and o.Frameworks. It fails,
// naming the framework, when one lacks a required part or serves a kind another one serves.
func Frameworks(o Options) (*framework.Set, error) {
	var set framework.Set
	for _, fw := range append(builtIn(o), o.Frameworks...) {
		if err := set.Add(fw); err != nil {
			return nil, err
		}
	}
	return &set, nil
}

// The --kinds names of the kinds with their own controller rather than a framework.
const (
	pyJobKind            = "pyjob"
	inferenceServiceKind = "inferenceservice"
	trainJobKind         = "trainjob"
	// kserveInferenceServiceKind is KServe's InferenceService (serving.kserve.io), served only when
	// named: its CRDs (config/crd/kserve) are not part of kiln's install, and a cluster may run
	// KServe's own controller.
	kserveInferenceServiceKind = "kserve-inferenceservice"
)

// KindNames lists the kinds that --kinds accepts, given the frameworks served.
func KindNames(frameworks *framework.Set) []string {
	names := append(defaultKinds(frameworks), kserveInferenceServiceKind)
	sort.Strings(names)
	return names
}

// defaultKinds are the kinds served without --kinds: all but KServe's.
func defaultKinds(frameworks *framework.Set) []string {
	return append([]string{pyJobKind, inferenceServiceKind, trainJobKind}, frameworks.Kinds()...)
}

// Scheme knows the built-in kinds and every kind kiln serves.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(kubeflowv1.AddToScheme(s))
	utilruntime.Must(kubeflowv2beta1.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(trainingv1alpha1.AddToScheme(s))
	utilruntime.Must(trainingv1beta1.AddToScheme(s))
	utilruntime.Must(servingv1alpha1.AddToScheme(s))
	utilruntime.Must(servingv1beta1.AddToScheme(s))
	utilruntime.Must(kservev1alpha1.AddToScheme(s))
	utilruntime.Must(kservev1beta1.AddToScheme(s))
	utilruntime.Must(trainerv1alpha1.AddToScheme(s))
	utilruntime.Must(jobsetv1alpha2.AddToScheme(s))
	return s
}

// schemeOf is Scheme with the kinds of frameworks too (those kiln does not ship).
func schemeOf(frameworks []framework.Framework) *runtime.Scheme {
	s := Scheme()
	for _, fw := range frameworks {
		s.AddKnownTypeWithName(kubeflowv1.GroupVersion.WithKind(fw.Kind), fw.NewJob())
		s.AddKnownTypeWithName(kubeflowv1.GroupVersion.WithKind(fw.Kind+"List"), fw.NewJobList())
	}
	return s
}

// New builds the manager with a reconciler for every enabled kind.
func New(cfg *rest.Config, o Options) (ctrl.Manager, error) {
	frameworks, own, err := enabled(o)
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	// No gzip: like kube-scheduler and kube-controller-manager, kiln talks to the apiserver over
	// the cluster's network, where compressing costs both sides more CPU than the bytes save (the
	// apiserver compresses large lists and watch-list streams, each event of these separately).
	cfg.DisableCompression = true
	cfg.Wrap(metrics.CountRequests)
	scheme := schemeOf(frameworks)
	log := o.Logger
	if log.GetSink() == nil {
		log = ctrl.Log
	}
	metricsOpts := metricsserver.Options{BindAddress: o.MetricsAddr, TLSOpts: tlsOpts(o.EnableHTTP2)}
	if o.SecureMetrics {
		// Callers need a bearer token allowed to get the /metrics non-resource URL.
		metricsOpts.SecureServing, metricsOpts.FilterProvider = true, metrics.Access
	}
	cacheOpts := cacheOptions(o.Namespaces, frameworks, own, o.Engine.DefaultCleanPodPolicy)
	cacheOpts.Scheme = scheme
	if err = trimWatches(&cacheOpts, cfg); err != nil {
		return nil, err
	}
	opts := ctrl.Options{
		Scheme:                        scheme,
		Cache:                         cacheOpts,
		Metrics:                       metricsOpts,
		HealthProbeBindAddress:        o.ProbeAddr,
		PprofBindAddress:              o.PprofAddr,
		LeaderElection:                o.LeaderElection,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionNamespace:       o.LeaderElectionNS,
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       ptr.To(gracefulShutdownTimeout),
		Controller:                    config.Controller{SkipNameValidation: &o.SkipNameValidation},
		Logger:                        o.Logger,
	}
	var keeper ctrlmanager.Runnable // what keeps the webhooks' certificate and CA bundles
	if o.Webhook.Port != 0 {
		direct, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
		if err != nil {
			return nil, err
		}
		if opts.WebhookServer, keeper, err = webhookServer(o.Webhook, direct, log, tlsOpts(o.EnableHTTP2)...); err != nil {
			return nil, err
		}
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		if meta.IsNoMatchError(err) { // a kind's cache entry (cacheOptions: the runtimes) names a kind the cluster does not serve
			return nil, fmt.Errorf("creating the manager: %w (%s)", err, installCRDs)
		}
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	eventSink, err := events.NewSink(mgr.GetConfig(), mgr.GetHTTPClient(), mgr.GetScheme(), log.WithName("events"))
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(eventSink); err != nil {
		return nil, fmt.Errorf("adding the event sink: %w", err)
	}
	engine := o.Engine
	if engine.Gang, err = gangBackend(mgr.GetRESTMapper(), o.GangSchedulerName, log); err != nil {
		return nil, err
	}
	var extras, jobs cache.Cache
	if len(frameworks) > 0 {
		if extras, err = replicajob.NewExtrasCache(mgr, o.Namespaces, frameworks); err != nil {
			return nil, fmt.Errorf("setting up the cache of the jobs' extras: %w", err)
		}
	}
	if replicajob.RunJobs(frameworks) {
		jobs = extras
	}
	children := replicajob.NewChildEvents(mgr.GetCache(), jobs, engine.ChildEventBatch)
	// Each kind's controller is set up at the first object of the kind (DECISIONS #24).
	var controllers []ondemand.Controller
	for _, fw := range frameworks {
		controllers = append(controllers, ondemand.Controller{Kind: fw.Kind, Object: fw.NewJob(), Setup: func() error {
			r := replicajob.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), fw, eventSink.Recorder("kiln-"+strings.ToLower(fw.Kind)), clock.RealClock{}, engine)
			return r.SetupWithManager(mgr, o.Workers, children, extras)
		}})
	}
	if own[pyJobKind] {
		controllers = append(controllers, ondemand.Controller{Kind: "PyJob", Object: &trainingv1beta1.PyJob{}, Setup: func() error {
			r := pyjob.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), eventSink.Recorder("kiln-pyjob"), clock.RealClock{}, engine.Gang)
			r.DefaultNetworkPolicy, r.Burst = o.Engine.DefaultNetworkPolicy, engine.Burst
			return r.SetupWithManager(mgr, o.Workers)
		}})
	}
	if own[trainJobKind] {
		controllers = append(controllers, ondemand.Controller{Kind: "TrainJob", Object: &trainerv1alpha1.TrainJob{}, Setup: func() error {
			r := trainjob.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), eventSink.Recorder("kiln-trainjob"), clock.RealClock{}, engine.Gang)
			r.Burst = engine.Burst
			return r.SetupWithManager(mgr, o.Workers)
		}})
	}
	if own[inferenceServiceKind] {
		controllers = append(controllers, ondemand.Controller{Kind: "InferenceService", Object: &servingv1beta1.InferenceService{}, Setup: func() error {
			r := inferenceservice.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), eventSink.Recorder("kiln-inferenceservice"), clock.RealClock{}, servingOptions(o))
			return r.SetupWithManager(mgr, o.Workers)
		}})
	}
	if own[kserveInferenceServiceKind] {
		controllers = append(controllers, ondemand.Controller{Kind: "InferenceService of KServe", Object: &kservev1beta1.InferenceService{}, Setup: func() error {
			r := inferenceservice.NewKServeReconciler(mgr.GetClient(), mgr.GetAPIReader(), eventSink.Recorder("kiln-kserve-inferenceservice"), clock.RealClock{}, servingOptions(o))
			return r.SetupWithManager(mgr, o.Workers)
		}})
	}
	for _, c := range controllers {
		c.Cache, c.Log, c.NotServed = mgr.GetCache(), log, installCRDs
		if err := mgr.Add(c); err != nil {
			return nil, fmt.Errorf("adding the %s controller: %w", c.Kind, err)
		}
	}
	if o.Webhook.Port != 0 {
		var rights admission.PodRights
		if !o.Webhook.AllowBorrowedRights {
			rights = admission.AccessReviews{Client: mgr.GetClient()}
		}
		admission.NewSet(scheme, admissionKinds(o, frameworks, own, rights, mgr.GetClient())).Register(mgr.GetWebhookServer())
		conversion.Register(mgr.GetWebhookServer(), scheme)
		if keeper != nil {
			if err := mgr.Add(keeper); err != nil {
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
	return withEvents{Manager: mgr, events: eventSink}, nil
}

// installCRDs is what to do when the cluster does not serve a kind kiln is told to serve.
const installCRDs = "install the CRDs of the kinds kiln serves, --kinds: config/crd, and config/crd/kserve for KServe's"

// gracefulShutdownTimeout and eventsFlushTimeout are how long a stopping manager gives its
// controllers and runnables, and then its event sink, to finish: 25 s together, within the 30 s
// the kubelet gives kiln's pod (terminationGracePeriodSeconds) before it kills it.
const (
	gracefulShutdownTimeout = 20 * time.Second
	eventsFlushTimeout      = 5 * time.Second
)

// withEvents is the manager, whose Start gives its event sink eventsFlushTimeout, once everything
// else has stopped, to write the events the controllers told as they stopped: the manager stops
// the sink, a runnable beside them, before them.
type withEvents struct {
	ctrl.Manager
	events *events.Sink
}

// Start runs the manager until ctx ends, then flushes the event sink; not when the manager
// failed or lost its lease (controller-runtime then stops at once, its controllers perhaps still
// running).
func (m withEvents) Start(ctx context.Context) error {
	if err := m.Manager.Start(ctx); err != nil {
		return err
	}
	flush, cancel := context.WithTimeout(context.WithoutCancel(ctx), eventsFlushTimeout)
	defer cancel()
	m.events.Flush(flush)
	return nil
}

// Admission is the admission webhook set of the kinds o enables.
func Admission(o Options) (*admission.Set, error) {
	frameworks, own, err := enabled(o)
	if err != nil {
		return nil, err
	}
	return admission.NewSet(schemeOf(frameworks), admissionKinds(o, frameworks, own, nil, nil)), nil
}

func admissionKinds(o Options, frameworks []framework.Framework, own map[string]bool, rights admission.PodRights, runtimes client.Reader) admission.Kinds {
	policy := o.Engine.DefaultCleanPodPolicy
	if policy == "" {
		policy = kubeflowv1.CleanPodPolicyRunning
	}
	return admission.Kinds{
		Frameworks: frameworks, CleanPodPolicy: policy,
		PyJobs: own[pyJobKind], InferenceServices: own[inferenceServiceKind], PodRights: rights,
		TrainJobs: own[trainJobKind], Runtimes: runtimes,
	}
}

// gangBackend is the gang scheduler --gang-scheduler-name names; "" is the native one where the
// cluster serves its PodGroups, else none. A named backend whose API is not served is kept: its
// jobs say so in their status (and get no pods) rather than run without the gang they asked for.
func gangBackend(mapper meta.RESTMapper, name string, log logr.Logger) (gang.Backend, error) {
	if name == "" {
		if gang.Served(mapper, gang.Native{}) {
			log.Info("gang scheduling with the cluster's own PodGroups (scheduling.k8s.io/v1beta1)")
			return gang.Native{}, nil
		}
		log.Info("no gang scheduling: the cluster serves no scheduling.k8s.io/v1beta1 PodGroups (--gang-scheduler-name picks another scheduler)")
		return nil, nil
	}
	b := gang.ForName(name)
	if b != nil && !gang.Served(mapper, b) {
		log.Info("WARNING: the gang scheduler's PodGroups are not served; jobs that need a gang wait and say so", "gangScheduler", name, "api", b.GroupKind().GroupVersion().String())
	}
	return b, nil
}

// enabled returns the frameworks of the enabled kinds, and which kinds with their own controller
// are enabled.
func enabled(o Options) ([]framework.Framework, map[string]bool, error) {
	all, err := Frameworks(o)
	if err != nil {
		return nil, nil, err
	}
	kinds := o.Kinds
	if len(kinds) == 0 {
		kinds = defaultKinds(all)
	}
	if o.KServe {
		kinds = append(slices.Clone(kinds), kserveInferenceServiceKind)
	}
	var out []framework.Framework
	own := map[string]bool{}
	for _, k := range kinds {
		k = strings.ToLower(k)
		if k == pyJobKind || k == inferenceServiceKind || k == trainJobKind || k == kserveInferenceServiceKind {
			own[k] = true
			continue
		}
		fw, ok := all.Get(k)
		if !ok {
			return nil, nil, fmt.Errorf("--kinds: unknown kind %q: use any of %s", k, strings.Join(KindNames(all), ", "))
		}
		out = append(out, fw)
	}
	return out, own, nil
}

// servingOptions are the InferenceService controller's options, watching the manager's namespaces.
func servingOptions(o Options) inferenceservice.Options {
	so := o.Serving
	so.Namespaces = o.Namespaces
	return so
}

// tlsOpts are the TLS settings of kiln's servers: HTTP/1.1 only unless http2 is on.
func tlsOpts(http2 bool) []func(*tls.Config) {
	if http2 {
		return nil
	}
	return []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
}
