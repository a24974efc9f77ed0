package inferenceservice

// kiln's own InferenceService, compiled for the engine: the framework's server, shaped by
// spec.pod, on each version's model.

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
	servingv1beta1 "github.com/kiln-ml/kiln/api/serving/v1beta1"
	"github.com/kiln-ml/kiln/internal/gpu"
	"github.com/kiln-ml/kiln/internal/kueue"
	"github.com/kiln-ml/kiln/internal/modeluri"
)

// fromKiln compiles kiln's InferenceService: each version runs the framework's server on its
// model URI, fetched by fetchImage's kiln-fetch (or mounted from a claim).
func fromKiln(isvc *servingv1alpha1.InferenceService, fetchImage string) endpoint {
	s := serverOf(isvc)
	e := endpoint{
		parent: isvc, name: isvc.Name, namespace: isvc.Namespace, address: isvc.Name, base: isvc.Name + "-predictor", id: isvc.Name, mount: kilnMount,
		owner: metav1.OwnerReference{APIVersion: servingv1beta1.GroupVersion.String(), Kind: "InferenceService", // the stored version
			Name: isvc.Name, UID: isvc.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)},
		queue:          map[string]string{},
		stable:         kilnVersion(isvc, s, isvc.Spec.ModelURI, fetchImage),
		port:           s.port,
		metrics:        s.metrics,
		startupTimeout: ptr.Deref(isvc.Spec.StartupTimeoutSeconds, DefaultStartupTimeoutSeconds),
		minReplicas:    isvc.Spec.MinReplicas, maxReplicas: isvc.Spec.MaxReplicas,
	}
	kueue.CopyLabels(isvc.Labels, e.queue)
	if t := isvc.Spec.Traffic; t != nil {
		c := kilnVersion(isvc, s, t.CanaryVersion, fetchImage)
		e.canary, e.canaryPercent = &c, t.CanaryPercent
	}
	if np := isvc.Spec.NetworkPolicy; np != nil {
		e.netpol, e.allowFrom = true, np.From
	}
	return e
}

// kilnVersion is the pods of server s serving the model at uri, shaped by spec.pod.
func kilnVersion(isvc *servingv1alpha1.InferenceService, s server, uri, fetchImage string) versionPods {
	pod := podSpec(isvc, predictor(isvc, s))
	mountModel(&pod, kilnMount, uri, fetchImage, isvc.Spec.Storage)
	labels, annotations := map[string]string{}, map[string]string{}
	if o := isvc.Spec.Pod; o != nil {
		maps.Copy(labels, o.Labels)
		maps.Copy(annotations, o.Annotations)
	}
	// LabelAPI marks another API's pods, which kiln's cache of this API's objects leaves out.
	delete(labels, LabelAPI)
	// The model URI, without its secrets, in an annotation: changing it rolls the Deployment (as
	// does a new signature of a pre-signed URL, through the fetch container's environment).
	annotations[modelURIAnnotation] = modeluri.Redact(uri)
	return versionPods{template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations}, Spec: pod},
		model: modeluri.Redact(uri)}
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
