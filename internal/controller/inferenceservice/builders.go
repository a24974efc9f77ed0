package inferenceservice

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
	servingv1beta1 "github.com/kiln-ml/kiln/api/serving/v1beta1"
	"github.com/kiln-ml/kiln/internal/gpu"
	"github.com/kiln-ml/kiln/internal/kueue"
	"github.com/kiln-ml/kiln/internal/modeluri"
	"github.com/kiln-ml/kiln/internal/netpol"
	"github.com/kiln-ml/kiln/internal/podsecurity"
)

// Labels on everything an InferenceService owns; version is stable or canary.
const (
	LabelService = "serving.kiln.dev/inferenceservice"
	LabelVersion = "serving.kiln.dev/version"
	stable       = "stable"
	canary       = "canary"
)

func itoa(i int32) string { return strconv.Itoa(int(i)) }

// predictorName is the Deployment and Service of one version.
func predictorName(isvc *servingv1alpha1.InferenceService, version string) string {
	if version == canary {
		return isvc.Name + "-predictor-canary"
	}
	return isvc.Name + "-predictor"
}

func selector(isvc *servingv1alpha1.InferenceService, version string) map[string]string {
	l := map[string]string{LabelService: isvc.Name}
	if version != "" {
		l[LabelVersion] = version
	}
	return l
}

func objectMeta(isvc *servingv1alpha1.InferenceService, name, version string) metav1.ObjectMeta {
	yes := true
	return metav1.ObjectMeta{
		Name: name, Namespace: isvc.Namespace, Labels: selector(isvc, version),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: servingv1beta1.GroupVersion.String(), Kind: "InferenceService", // the stored version
			Name: isvc.Name, UID: isvc.UID, Controller: &yes, BlockOwnerDeletion: &yes}},
	}
}

// desiredDeployment runs one version of the model. replicas nil leaves the count to an
// autoscaler (HPA or KEDA), which then owns it.
func desiredDeployment(isvc *servingv1alpha1.InferenceService, version, modelURI, fetchImage string, replicas *int32) *appsv1.Deployment {
	s := serverOf(isvc)
	labels := selector(isvc, version)
	pod := podSpec(isvc, predictor(isvc, s))
	mountModel(&pod, modelURI, fetchImage, isvc.Spec.Storage)
	meta := objectMeta(isvc, predictorName(isvc, version), version)
	podLabels, podAnnotations := map[string]string{}, map[string]string{}
	if o := isvc.Spec.Pod; o != nil {
		maps.Copy(podLabels, o.Labels)
		maps.Copy(podAnnotations, o.Annotations)
	}
	maps.Copy(podLabels, selector(isvc, version))
	// Kueue's Deployment integration: the queue (and priority) the InferenceService names.
	kueue.CopyLabels(isvc.Labels, meta.Labels)
	kueue.CopyLabels(isvc.Labels, podLabels)
	// The model URI, without its secrets, in an annotation: changing it rolls the Deployment (as
	// does a new signature of a pre-signed URL, through the fetch container's environment).
	podAnnotations[modelURIAnnotation] = modeluri.Redact(modelURI)
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: meta,
		Spec: appsv1.DeploymentSpec{
			Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: podAnnotations},
				Spec:       pod,
			},
		},
	}
}

func predictor(isvc *servingv1alpha1.InferenceService, s server) corev1.Container {
	r := isvc.Spec.Resources
	req, lim := corev1.ResourceList{}, corev1.ResourceList{}
	set := func(l corev1.ResourceList, name corev1.ResourceName, q *resource.Quantity) {
		if q != nil {
			l[name] = *q
		}
	}
	set(req, corev1.ResourceCPU, r.CPURequest)
	set(req, corev1.ResourceMemory, r.MemoryRequest)
	set(lim, corev1.ResourceCPU, r.CPULimit)
	set(lim, corev1.ResourceMemory, r.MemoryLimit)
	if isvc.Spec.GPUPerReplica > 0 {
		lim[gpu.Resource(isvc.Spec.GPUResource)] = *resource.NewQuantity(int64(isvc.Spec.GPUPerReplica), resource.DecimalSI)
	}
	c := corev1.Container{
		Name: "predictor", Image: s.image,
		Args:           append(serverArgs(isvc, s), isvc.Spec.Args...),
		Env:            s.env,
		Ports:          containerPorts(s),
		StartupProbe:   s.startupProbe(ptr.Deref(isvc.Spec.StartupTimeoutSeconds, DefaultStartupTimeoutSeconds)),
		ReadinessProbe: s.probe(s.ready),
		LivenessProbe:  s.probe(s.live),
		Resources:      corev1.ResourceRequirements{Requests: req, Limits: lim},
		VolumeMounts:   []corev1.VolumeMount{{Name: "model", MountPath: ModelDir, ReadOnly: true}},
	}
	if o := isvc.Spec.Pod; o != nil {
		c.Env = append(slices.Clone(c.Env), o.Env...)
		c.EnvFrom, c.SecurityContext = o.EnvFrom, o.ContainerSecurityContext
	}
	return c
}

// containerPorts are the serving port and, when the server publishes metrics on another, that.
func containerPorts(s server) []corev1.ContainerPort {
	ports := []corev1.ContainerPort{{Name: "http", ContainerPort: s.port}}
	if s.metrics.port != 0 && s.metrics.port != s.port {
		ports = append(ports, corev1.ContainerPort{Name: "metrics", ContainerPort: s.metrics.port})
	}
	return ports
}

// serverArgs are the framework's arguments for the spec: TorchServe without token authorization
// only when spec.tokenAuth says Disabled.
func serverArgs(isvc *servingv1alpha1.InferenceService, s server) []string {
	args := s.args(s.port, isvc.Spec.GPUPerReplica)
	if isvc.Spec.Framework == servingv1alpha1.FrameworkTorchServe && isvc.Spec.TokenAuth == "Disabled" {
		args = append(args, "--disable-token-auth")
	}
	return args
}

// podSpec is the pod of a replica running server, shaped by spec.pod; replicas asking for GPUs
// tolerate the GPU resource's taint.
func podSpec(isvc *servingv1alpha1.InferenceService, server corev1.Container) corev1.PodSpec {
	pod := corev1.PodSpec{Containers: []corev1.Container{server}}
	if o := isvc.Spec.Pod; o != nil {
		pod.NodeSelector, pod.Tolerations, pod.Affinity = o.NodeSelector, o.Tolerations, o.Affinity
		pod.ServiceAccountName, pod.ImagePullSecrets, pod.SecurityContext = o.ServiceAccountName, o.ImagePullSecrets, o.SecurityContext
		pod.RuntimeClassName, pod.PriorityClassName = o.RuntimeClassName, o.PriorityClassName
	}
	pod.Tolerations = gpu.Tolerations(pod.Tolerations, gpu.Resource(isvc.Spec.GPUResource), isvc.Spec.GPUPerReplica)
	return pod
}

// DefaultStartupTimeoutSeconds is how long a replica may load its model unless the spec says.
const DefaultStartupTimeoutSeconds int32 = 600

// mountModel mounts pvc://claim/path read-only at ModelDir, or fetches any other URI into an
// emptyDir (of storage.sizeLimit) with an init container running kiln-fetch, which alone gets
// the storage Secret's variables and tells why it failed in its termination message.
func mountModel(pod *corev1.PodSpec, uri, fetchImage string, storage *servingv1alpha1.ModelStorage) {
	if rest, ok := strings.CutPrefix(uri, "pvc://"); ok {
		claim, path, _ := strings.Cut(rest, "/")
		pod.Volumes = []corev1.Volume{{Name: "model", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: true}}}}
		pod.Containers[0].VolumeMounts[0].SubPath = path
		return
	}
	if storage == nil {
		storage = &servingv1alpha1.ModelStorage{}
	}
	size := ptr.Deref(storage.SizeLimit, DefaultModelSizeLimit)
	// The fetch's own /tmp (a key file of the storage Secret goes there) is not the model's
	// volume, which the server mounts: its root filesystem is read-only.
	pod.Volumes = []corev1.Volume{
		{Name: "model", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &size}}},
		{Name: fetchTmp, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("64Mi"))}}},
	}
	fetch := corev1.Container{
		Name: fetchContainer, Image: fetchImage, Command: []string{FetchCommand},
		// The URI goes in the environment, not the arguments: a pre-signed URL's signature is a
		// credential, and a node's process list shows arguments.
		Env:                      []corev1.EnvVar{{Name: FetchURIEnv, Value: uri}},
		Args:                     []string{"--dest", ModelDir, "--max-bytes", strconv.FormatInt(size.Value(), 10)},
		VolumeMounts:             []corev1.VolumeMount{{Name: "model", MountPath: ModelDir}, {Name: fetchTmp, MountPath: "/tmp"}},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          podsecurity.Restricted(),
	}
	if storage.SHA256 != "" {
		fetch.Args = append(fetch.Args, "--sha256", storage.SHA256)
	}
	if storage.SecretName != "" {
		fetch.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: storage.SecretName}}}}
	}
	pod.InitContainers = []corev1.Container{fetch}
}

// FetchURIEnv is the environment variable that gives kiln-fetch the model URI.
const FetchURIEnv = "KILN_MODEL_URI"

// fetchContainer is the init container that fetches the model, running FetchCommand of the
// fetch image (kiln's: cmd/kiln-fetch).
const (
	fetchContainer = "model-fetch"
	fetchTmp       = "model-fetch-tmp"
	FetchCommand   = "/kiln-fetch"
)

// DefaultModelSizeLimit bounds a fetched model unless spec.storage.sizeLimit says otherwise.
var DefaultModelSizeLimit = resource.MustParse("50Gi")

// desiredService is the stable Service <name> (version ""; it selects every version, so replica
// counts split the traffic, or the one version that takes all of it) or a version's Service.
// A per-version Service also names the metrics port, for the ServiceMonitor.
func desiredService(isvc *servingv1alpha1.InferenceService, name, version string, selects string) *corev1.Service {
	s := serverOf(isvc)
	ports := []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(s.port)}}
	if version != "" && s.metrics.port != 0 && s.metrics.port != s.port {
		ports = append(ports, corev1.ServicePort{Name: "metrics", Port: s.metrics.port, TargetPort: intstr.FromString("metrics")})
	}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: objectMeta(isvc, name, version),
		Spec:       corev1.ServiceSpec{Selector: selector(isvc, selects), Ports: ports},
	}
}

// desiredHPA scales one version's Deployment between min and max on CPU.
func desiredHPA(isvc *servingv1alpha1.InferenceService, version string, min, max int32) *autoscalingv2.HorizontalPodAutoscaler {
	target := int32(80)
	return &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: objectMeta(isvc, predictorName(isvc, version), version),
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: predictorName(isvc, version)},
			MinReplicas:    &min, MaxReplicas: max,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &target}}}},
		},
	}
}

// unstructuredOf builds an object of an API kiln does not import (Gateway API, KEDA, Prometheus
// Operator) with the InferenceService's metadata.
func unstructuredOf(isvc *servingv1alpha1.InferenceService, apiVersion, kind, name string, spec map[string]any) *unstructured.Unstructured {
	m := objectMeta(isvc, name, "")
	owner := m.OwnerReferences[0]
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{
			"name": name, "namespace": isvc.Namespace, "labels": map[string]any{LabelService: isvc.Name},
			"ownerReferences": []any{map[string]any{"apiVersion": owner.APIVersion, "kind": owner.Kind, "name": owner.Name,
				"uid": string(owner.UID), "controller": true, "blockOwnerDeletion": true}},
		},
		"spec": spec,
	}}
}

// desiredHTTPRoute splits requests for the stable Service between the versions' Services by
// weight (Gateway API for a mesh: the route's parent is the Service itself).
func desiredHTTPRoute(isvc *servingv1alpha1.InferenceService, canaryPercent int32) *unstructured.Unstructured {
	backend := func(version string, weight int32) any {
		return map[string]any{"name": predictorName(isvc, version), "port": int64(80), "weight": int64(weight)}
	}
	return unstructuredOf(isvc, "gateway.networking.k8s.io/v1", "HTTPRoute", isvc.Name, map[string]any{
		"parentRefs": []any{map[string]any{"group": "", "kind": "Service", "name": isvc.Name, "port": int64(80)}},
		"rules":      []any{map[string]any{"backendRefs": []any{backend(stable, 100-canaryPercent), backend(canary, canaryPercent)}}},
	})
}

// desiredScaledObject lets KEDA scale the stable Deployment from zero on the requests the HTTP
// add-on's interceptor counts for the InterceptorRoute (its scaler, an external-push trigger).
func desiredScaledObject(isvc *servingv1alpha1.InferenceService, max int32, scaler string) *unstructured.Unstructured {
	return unstructuredOf(isvc, "keda.sh/v1alpha1", "ScaledObject", predictorName(isvc, stable), map[string]any{
		"scaleTargetRef":  map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": predictorName(isvc, stable)},
		"minReplicaCount": int64(0), "maxReplicaCount": int64(max),
		"triggers": []any{map[string]any{"type": "external-push", "metadata": map[string]any{
			"interceptorRoute": isvc.Name, "scalerAddress": scaler}}},
	})
}

// DefaultConcurrencyTarget is the concurrent requests per replica the HTTP add-on scales for.
const DefaultConcurrencyTarget = 100

// desiredInterceptorRoute routes the InferenceService's host names, through the HTTP add-on's
// interceptor, to the stable version's Service, holding requests while it scales from zero for
// as long as a replica may take to start.
func desiredInterceptorRoute(isvc *servingv1alpha1.InferenceService, interceptor string) *unstructured.Unstructured {
	_, port := interceptorHost(interceptor)
	var hosts []any
	for _, h := range []string{isvc.Name, isvc.Name + "." + isvc.Namespace, isvc.Name + "." + isvc.Namespace + ".svc", serviceHost(isvc)} {
		hosts = append(hosts, h, h+":"+port)
	}
	startup := ptr.Deref(isvc.Spec.StartupTimeoutSeconds, DefaultStartupTimeoutSeconds)
	return unstructuredOf(isvc, "http.keda.sh/v1beta1", "InterceptorRoute", isvc.Name, map[string]any{
		"target":        map[string]any{"service": predictorName(isvc, stable), "port": int64(80)},
		"rules":         []any{map[string]any{"hosts": hosts}},
		"scalingMetric": map[string]any{"concurrency": map[string]any{"targetValue": int64(DefaultConcurrencyTarget)}},
		"timeouts":      map[string]any{"readiness": strconv.Itoa(int(startup)) + "s"},
	})
}

// interceptorHost splits the interceptor option <service>.<namespace>:<port> into the Service's
// cluster DNS name and the port.
func interceptorHost(interceptor string) (string, string) {
	host, port, ok := strings.Cut(interceptor, ":")
	if !ok {
		port = "8080"
	}
	return host + ".svc.cluster.local", port
}

// serviceHost is the stable Service's cluster DNS name.
func serviceHost(isvc *servingv1alpha1.InferenceService) string {
	return isvc.Name + "." + isvc.Namespace + ".svc.cluster.local"
}

// desiredStableService is the Service <name>, the InferenceService's address: it selects the
// versions' pods, or, while KEDA may scale the service to zero, it is a name for the HTTP
// add-on's interceptor, which holds requests until a replica is ready.
func desiredStableService(isvc *servingv1alpha1.InferenceService, sc scaling, interceptor string) *corev1.Service {
	svc := desiredService(isvc, isvc.Name, "", sc.serves)
	if sc.keda {
		host, port := interceptorHost(interceptor)
		p, _ := strconv.Atoi(port)
		svc.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: host,
			Ports: []corev1.ServicePort{{Name: "http", Port: int32(p), TargetPort: intstr.FromInt32(int32(p))}}}
	}
	return svc
}

// desiredServiceMonitor scrapes every version's pods, through the per-version Services (the
// stable Service <name> would scrape them twice): the samples carry service="<name>-predictor"
// or "<name>-predictor-canary". Nil when the server publishes no metrics kiln knows of.
func desiredServiceMonitor(isvc *servingv1alpha1.InferenceService) *unstructured.Unstructured {
	m := serverOf(isvc).metrics
	if !m.known() {
		return nil
	}
	port := "http"
	if m.port != 0 && m.port != serverOf(isvc).port {
		port = "metrics"
	}
	return unstructuredOf(isvc, "monitoring.coreos.com/v1", "ServiceMonitor", isvc.Name, map[string]any{
		"selector": map[string]any{"matchLabels": map[string]any{LabelService: isvc.Name},
			"matchExpressions": []any{map[string]any{"key": LabelVersion, "operator": "Exists"}}},
		"endpoints": []any{map[string]any{"port": port, "path": m.path}},
	})
}

// desiredPrometheusRule alerts on unavailable replicas (kube-state-metrics) and, where the
// server's request counters are known, on more than 5% failed requests.
func desiredPrometheusRule(isvc *servingv1alpha1.InferenceService) *unstructured.Unstructured {
	ns := isvc.Namespace
	rules := []any{map[string]any{"alert": "InferenceServiceReplicasUnavailable", "for": "5m",
		"expr":   `sum(kube_deployment_status_replicas_unavailable{namespace="` + ns + `",deployment=~"` + isvc.Name + `-predictor(-canary)?"}) > 0`,
		"labels": map[string]any{"severity": "warning"}}}
	if m := serverOf(isvc).metrics; m.known() {
		scope := `namespace="` + ns + `",service=~"` + isvc.Name + `-predictor(-canary)?"`
		rate := func(series []string) string {
			terms := make([]string, len(series))
			for i, s := range series {
				// A counter not yet published (no 4xx so far) would make the sum empty.
				terms[i] = "(sum(rate(" + withMatchers(s, scope) + "[5m])) or vector(0))"
			}
			return strings.Join(terms, " + ")
		}
		rules = append(rules, map[string]any{"alert": "InferenceServiceHighErrorRate", "for": "5m",
			"expr":   "(" + rate(m.failed) + ") / (" + rate(m.ok) + " + " + rate(m.failed) + ") > 0.05",
			"labels": map[string]any{"severity": "critical"}})
	}
	return unstructuredOf(isvc, "monitoring.coreos.com/v1", "PrometheusRule", isvc.Name, map[string]any{
		"groups": []any{map[string]any{"name": "kiln-inferenceservice-" + isvc.Name, "rules": rules}},
	})
}

// withMatchers adds label matchers to a series selector: name or name{matchers}.
func withMatchers(series, matchers string) string {
	if name, rest, ok := strings.Cut(series, "{"); ok {
		return name + "{" + matchers + "," + rest
	}
	return series + "{" + matchers + "}"
}

// desiredNetworkPolicy lets only spec.networkPolicy.from reach every version's pods — and the KEDA
// HTTP add-on's interceptor, which forwards the requests of a service that scales to zero.
func desiredNetworkPolicy(isvc *servingv1alpha1.InferenceService, sc scaling, interceptor string) *networkingv1.NetworkPolicy {
	from := slices.Clone(isvc.Spec.NetworkPolicy.From)
	if sc.keda {
		host, _ := interceptorHost(interceptor) // <service>.<namespace>.svc.cluster.local
		if parts := strings.Split(host, "."); len(parts) > 1 {
			from = append(from, networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: parts[1]}}})
		}
	}
	np := netpol.ForService(isvc.Name, isvc.Namespace, selector(isvc, ""), from)
	np.ObjectMeta = objectMeta(isvc, np.Name, "")
	return np
}
