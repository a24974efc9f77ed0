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
	"github.com/kiln-ml/kiln/internal/netpol"
	"github.com/kiln-ml/kiln/internal/podsecurity"
)

// Labels on everything an InferenceService owns; version is stable or canary.
const (
	LabelService = "serving.kiln.dev/inferenceservice"
	// LabelAPI is on what an InferenceService of another API than kiln's makes: kserve.
	LabelAPI     = "serving.kiln.dev/api"
	LabelVersion = "serving.kiln.dev/version"
	stable       = "stable"
	canary       = "canary"
)

func itoa(i int32) string { return strconv.Itoa(int(i)) }

// predictorName is the Deployment and Service of one version.
func predictorName(e *endpoint, version string) string {
	if version == canary && e.canaryName != "" {
		return e.canaryName
	}
	if version == canary {
		return e.base + "-canary"
	}
	return e.base
}

func selector(e *endpoint, version string) map[string]string {
	l := map[string]string{LabelService: e.id}
	if version != "" {
		l[LabelVersion] = version
	}
	return l
}

func objectMeta(e *endpoint, name, version string) metav1.ObjectMeta {
	labels := maps.Clone(e.labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, selector(e, version))
	if e.deploymentSelector != nil { // the API's own labels on every object, as its pods have them (KServe's app)
		maps.Copy(labels, e.deploymentSelector(predictorName(e, version)))
	}
	return metav1.ObjectMeta{Name: name, Namespace: e.namespace, Labels: labels, Annotations: maps.Clone(e.annotations),
		OwnerReferences: []metav1.OwnerReference{e.owner}}
}

// podSelector is the selector of a version's Deployment.
func podSelector(e *endpoint, version string) map[string]string {
	if e.deploymentSelector != nil {
		return e.deploymentSelector(predictorName(e, version))
	}
	return selector(e, version)
}

// desiredDeployment runs one version of the model. replicas nil leaves the count to an
// autoscaler (HPA or KEDA), which then owns it.
func desiredDeployment(e *endpoint, version string, replicas *int32) *appsv1.Deployment {
	meta := objectMeta(e, predictorName(e, version), version)
	tmpl := *e.of(version).template.DeepCopy()
	tmpl.Labels = union(e.labels, tmpl.Labels, selector(e, version), podSelector(e, version))
	tmpl.Annotations = union(e.annotations, tmpl.Annotations)
	// Kueue's Deployment integration: the queue (and priority) the InferenceService names.
	maps.Copy(meta.Labels, e.queue)
	maps.Copy(tmpl.Labels, e.queue)
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: meta,
		Spec: appsv1.DeploymentSpec{
			Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: podSelector(e, version)},
			Template: tmpl,
		},
	}
	if e.strategy != nil {
		d.Spec.Strategy = *e.strategy.DeepCopy()
	}
	return d
}

// DefaultStartupTimeoutSeconds is how long a replica may load its model unless the spec says.
const DefaultStartupTimeoutSeconds int32 = 600

// modelMount is where a version's model goes: the container that serves it (which finds it in
// ModelDir), the model volume's name and the fetch container's.
type modelMount struct{ container, volume, fetch string }

// kilnMount is kiln's InferenceService's: its predictor container, volume model, model-fetch.
var kilnMount = modelMount{container: "predictor", volume: "model", fetch: fetchContainer}

// mountModel mounts pvc://claim/path read-only at ModelDir of the serving container, or fetches
// any other URI into an emptyDir (of storage.sizeLimit) with an init container running
// kiln-fetch, which alone gets the storage Secret's variables and tells why it failed in its
// termination message. The pod's own volumes and init containers stay (the fetch runs first).
func mountModel(pod *corev1.PodSpec, m modelMount, uri, fetchImage string, storage *servingv1alpha1.ModelStorage) {
	mount := corev1.VolumeMount{Name: m.volume, MountPath: ModelDir, ReadOnly: true}
	defer func() {
		for i := range pod.Containers {
			if pod.Containers[i].Name == m.container {
				pod.Containers[i].VolumeMounts = append([]corev1.VolumeMount{mount}, pod.Containers[i].VolumeMounts...)
			}
		}
	}()
	if rest, ok := strings.CutPrefix(uri, "pvc://"); ok {
		claim, path, _ := strings.Cut(rest, "/")
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: m.volume, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: true}}})
		mount.SubPath = path
		return
	}
	if storage == nil {
		storage = &servingv1alpha1.ModelStorage{}
	}
	size := ptr.Deref(storage.SizeLimit, DefaultModelSizeLimit)
	// The fetch's own /tmp (a key file of the storage Secret goes there) is not the model's
	// volume, which the server mounts: its root filesystem is read-only.
	pod.Volumes = append(pod.Volumes,
		corev1.Volume{Name: m.volume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &size}}},
		corev1.Volume{Name: fetchTmp, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("64Mi"))}}},
	)
	fetch := corev1.Container{
		Name: m.fetch, Image: fetchImage, Command: []string{FetchCommand},
		// The URI goes in the environment, not the arguments: a pre-signed URL's signature is a
		// credential, and a node's process list shows arguments.
		Env:                      []corev1.EnvVar{{Name: FetchURIEnv, Value: uri}},
		Args:                     []string{"--dest", ModelDir, "--max-bytes", strconv.FormatInt(size.Value(), 10)},
		VolumeMounts:             []corev1.VolumeMount{{Name: m.volume, MountPath: ModelDir}, {Name: fetchTmp, MountPath: "/tmp"}},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          podsecurity.Restricted(),
	}
	if storage.SHA256 != "" {
		fetch.Args = append(fetch.Args, "--sha256", storage.SHA256)
	}
	if storage.SecretName != "" {
		fetch.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: storage.SecretName}}}}
	}
	pod.InitContainers = append([]corev1.Container{fetch}, pod.InitContainers...)
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
func desiredService(e *endpoint, name, version string, selects string) *corev1.Service {
	ports := []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(e.port)}}
	if version != "" && e.metrics.port != 0 && e.metrics.port != e.port {
		ports = append(ports, corev1.ServicePort{Name: "metrics", Port: e.metrics.port, TargetPort: intstr.FromInt32(e.metrics.port)})
	}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: objectMeta(e, name, version),
		Spec:       corev1.ServiceSpec{Selector: selector(e, selects), Ports: ports},
	}
}

// desiredHPA scales one version's Deployment between min and max on CPU.
func desiredHPA(e *endpoint, version string, min, max int32) *autoscalingv2.HorizontalPodAutoscaler {
	metrics := e.hpaMetrics
	if metrics == nil {
		metrics = []autoscalingv2.MetricSpec{cpuUtilization(80)}
	}
	return &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: objectMeta(e, predictorName(e, version), version),
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: predictorName(e, version)},
			MinReplicas:    &min, MaxReplicas: max,
			Metrics:  metrics,
			Behavior: e.hpaBehavior,
		},
	}
}

// cpuUtilization is the HPA metric of an average CPU use of percent of the requests.
func cpuUtilization(percent int32) autoscalingv2.MetricSpec {
	return resourceMetric(corev1.ResourceCPU, autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: &percent})
}

// resourceMetric is the HPA metric of a resource of the pods at target.
func resourceMetric(name corev1.ResourceName, target autoscalingv2.MetricTarget) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: name, Target: target}}
}

// unstructuredOf builds an object of an API kiln does not import (Gateway API, KEDA, Prometheus
// Operator) with the InferenceService's metadata.
func unstructuredOf(e *endpoint, apiVersion, kind, name string, spec map[string]any) *unstructured.Unstructured {
	owner := e.owner
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{
			"name": name, "namespace": e.namespace, "labels": labelsOf(e),
			"ownerReferences": []any{map[string]any{"apiVersion": owner.APIVersion, "kind": owner.Kind, "name": owner.Name,
				"uid": string(owner.UID), "controller": true, "blockOwnerDeletion": true}},
		},
		"spec": spec,
	}}
}

// labelsOf are the labels of an endpoint's objects of the optional APIs.
func labelsOf(e *endpoint) map[string]any {
	out := map[string]any{}
	for k, v := range e.labels {
		out[k] = v
	}
	out[LabelService] = e.id
	return out
}

// desiredHTTPRoute splits requests for the stable Service between the versions' Services by
// weight (Gateway API for a mesh: the route's parent is the Service itself).
func desiredHTTPRoute(e *endpoint) *unstructured.Unstructured {
	canaryPercent := e.canaryPercent
	backend := func(version string, weight int32) any {
		return map[string]any{"name": predictorName(e, version), "port": int64(80), "weight": int64(weight)}
	}
	return unstructuredOf(e, "gateway.networking.k8s.io/v1", "HTTPRoute", e.name, map[string]any{
		"parentRefs": []any{map[string]any{"group": "", "kind": "Service", "name": e.address, "port": int64(80)}},
		"rules":      []any{map[string]any{"backendRefs": []any{backend(stable, 100-canaryPercent), backend(canary, canaryPercent)}}},
	})
}

// desiredIngress routes requests for the ingress's hosts, from outside the cluster, to the
// address Service.
func desiredIngress(e *endpoint) *networkingv1.Ingress {
	in := e.ingress
	backend := networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: e.address, Port: networkingv1.ServiceBackendPort{Number: 80}}}
	var rules []networkingv1.IngressRule
	for _, h := range in.hosts {
		rules = append(rules, networkingv1.IngressRule{Host: h, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: backend}}}}})
	}
	out := &networkingv1.Ingress{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
		ObjectMeta: objectMeta(e, in.name, ""),
		Spec:       networkingv1.IngressSpec{Rules: rules},
	}
	if in.class != "" {
		out.Spec.IngressClassName = ptr.To(in.class)
	}
	return out
}

// desiredVirtualService splits requests for the address between the versions' Services by
// weight, for the clients in Istio's mesh: destinations are the versions' own Services, so no
// DestinationRule subsets are needed.
func desiredVirtualService(e *endpoint) *unstructured.Unstructured {
	dest := func(version string, weight int32) any {
		return map[string]any{"destination": map[string]any{"host": predictorName(e, version) + "." + e.namespace + ".svc.cluster.local",
			"port": map[string]any{"number": int64(80)}}, "weight": int64(weight)}
	}
	return unstructuredOf(e, "networking.istio.io/v1", "VirtualService", e.name, map[string]any{
		"hosts": []any{serviceHost(e)},
		"http":  []any{map[string]any{"route": []any{dest(stable, 100-e.canaryPercent), dest(canary, e.canaryPercent)}}},
	})
}

// desiredScaledObject lets KEDA scale the stable Deployment from zero on the requests the HTTP
// add-on's interceptor counts for the InterceptorRoute (its scaler, an external-push trigger).
func desiredScaledObject(e *endpoint, max int32, scaler string) *unstructured.Unstructured {
	return unstructuredOf(e, "keda.sh/v1alpha1", "ScaledObject", predictorName(e, stable), map[string]any{
		"scaleTargetRef":  map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": predictorName(e, stable)},
		"minReplicaCount": int64(0), "maxReplicaCount": int64(max),
		"triggers": []any{map[string]any{"type": "external-push", "metadata": map[string]any{
			"interceptorRoute": e.name, "scalerAddress": scaler}}},
	})
}

// DefaultConcurrencyTarget is the concurrent requests per replica the HTTP add-on scales for.
const DefaultConcurrencyTarget = 100

// desiredInterceptorRoute routes the InferenceService's host names, through the HTTP add-on's
// interceptor, to the stable version's Service, holding requests while it scales from zero for
// as long as a replica may take to start.
func desiredInterceptorRoute(e *endpoint, interceptor string) *unstructured.Unstructured {
	_, port := interceptorHost(interceptor)
	var hosts []any
	for _, h := range []string{e.address, e.address + "." + e.namespace, e.address + "." + e.namespace + ".svc", serviceHost(e)} {
		hosts = append(hosts, h, h+":"+port)
	}
	startup := e.startupTimeout
	return unstructuredOf(e, "http.keda.sh/v1beta1", "InterceptorRoute", e.name, map[string]any{
		"target":        map[string]any{"service": predictorName(e, stable), "port": int64(80)},
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
func serviceHost(e *endpoint) string {
	return e.address + "." + e.namespace + ".svc.cluster.local"
}

// desiredStableService is the Service <name>, the InferenceService's address: it selects the
// versions' pods, or, while KEDA may scale the service to zero, it is a name for the HTTP
// add-on's interceptor, which holds requests until a replica is ready.
func desiredStableService(e *endpoint, sc scaling, interceptor string) *corev1.Service {
	version := "" // it selects every version
	if e.address == predictorName(e, stable) {
		version = stable // it is the stable version's own Service too, which the ServiceMonitor scrapes
	}
	selects := sc.serves
	if version == stable && (sc.mode == servingv1alpha1.TrafficHTTPRoute || sc.mode == servingv1alpha1.TrafficVirtualService) {
		selects = stable // the route's stable backend: the stable pods alone
	}
	svc := desiredService(e, e.address, version, selects)
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
func desiredServiceMonitor(e *endpoint) *unstructured.Unstructured {
	m := e.metrics
	if !m.known() {
		return nil
	}
	port := "http"
	if m.port != 0 && m.port != e.port {
		port = "metrics"
	}
	return unstructuredOf(e, "monitoring.coreos.com/v1", "ServiceMonitor", e.name, map[string]any{
		"selector": map[string]any{"matchLabels": map[string]any{LabelService: e.id},
			"matchExpressions": []any{map[string]any{"key": LabelVersion, "operator": "Exists"}}},
		"endpoints": []any{map[string]any{"port": port, "path": m.path}},
	})
}

// desiredPrometheusRule alerts on unavailable replicas (kube-state-metrics) and, where the
// server's request counters are known, on more than 5% failed requests.
func desiredPrometheusRule(e *endpoint) *unstructured.Unstructured {
	ns := e.namespace
	versions := predictorName(e, stable) + "|" + predictorName(e, canary)
	rules := []any{map[string]any{"alert": "InferenceServiceReplicasUnavailable", "for": "5m",
		"expr":   `sum(kube_deployment_status_replicas_unavailable{namespace="` + ns + `",deployment=~"` + versions + `"}) > 0`,
		"labels": map[string]any{"severity": "warning"}}}
	if m := e.metrics; m.counts() {
		scope := `namespace="` + ns + `",service=~"` + versions + `"`
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
	return unstructuredOf(e, "monitoring.coreos.com/v1", "PrometheusRule", e.name, map[string]any{
		"groups": []any{map[string]any{"name": "kiln-inferenceservice-" + e.name, "rules": rules}},
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
func desiredNetworkPolicy(e *endpoint, sc scaling, interceptor string) *networkingv1.NetworkPolicy {
	from := slices.Clone(e.allowFrom)
	if sc.keda {
		host, _ := interceptorHost(interceptor) // <service>.<namespace>.svc.cluster.local
		if parts := strings.Split(host, "."); len(parts) > 1 {
			from = append(from, networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: parts[1]}}})
		}
	}
	np := netpol.ForService(e.name, e.namespace, selector(e, ""), from)
	np.ObjectMeta = objectMeta(e, np.Name, "")
	return np
}

// union is the maps merged, later ones winning.
func union(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}
