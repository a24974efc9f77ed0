package inferenceservice

import (
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kiln-ml/kiln/internal/kserve"
)

// endpoint is what the serving engine runs, whichever API asked for it: each version's pods, the
// port they serve on, the replica bounds, the canary's share, who may connect and what is
// monitored. The builders read nothing else; an API's front end (fromKiln) compiles its object
// to one.
type endpoint struct {
	// parent is the API object the children belong to.
	parent          client.Object
	name, namespace string
	// id is the value of LabelService on everything made, unique among the APIs' objects of one
	// namespace.
	id string
	// base names the stable version's Deployment, Service and autoscaler (the canary's: base-canary).
	base string
	// address is the Service clients call (every version behind it).
	address string
	// deploymentSelector, when set, is the immutable selector of the Deployment named so; kiln's
	// version labels otherwise.
	deploymentSelector func(deployment string) map[string]string
	// stopped: everything made is deleted, the status says so.
	stopped bool
	// runtime is the KServe runtime that serves the model, for the status; nil otherwise.
	runtime *kserve.Runtime
	// mount is where each version's model goes.
	mount modelMount
	// labels and annotations are on every object and pod, besides kiln's labels.
	labels, annotations map[string]string
	// owner is the controller reference the children carry.
	owner metav1.OwnerReference
	// queue are the parent's labels Kueue reads, copied to the Deployments and their pods.
	queue map[string]string
	// stable runs the model; canary, when set, takes canaryPercent of the requests. canaryName
	// names the canary's Deployment, Service and autoscaler ("": base-canary).
	stable        versionPods
	canary        *versionPods
	canaryPercent int32
	canaryName    string
	// retired name the versions the spec no longer has (canaries, a renamed predictor), whose
	// objects go.
	retired []string
	// port serves requests; metrics is where the server publishes Prometheus metrics.
	port    int32
	metrics promEndpoint
	// startupTimeout is how long, in seconds, a replica may take to load its model.
	startupTimeout int32
	// minReplicas (default 1; 0 scales to zero) and maxReplicas (default minReplicas) bound the
	// replicas.
	minReplicas, maxReplicas *int32
	// hpaMetrics are what an HPA scales on; nil is 80% of the CPU requests. hpaBehavior, when set,
	// is its scaling behavior.
	hpaMetrics  []autoscalingv2.MetricSpec
	hpaBehavior *autoscalingv2.HorizontalPodAutoscalerBehavior
	// strategy, when set, is how the Deployments replace their pods.
	strategy *appsv1.DeploymentStrategy
	// allowFrom, when netpol, are the only peers that may reach the pods.
	netpol    bool
	allowFrom []networkingv1.NetworkPolicyPeer
	// ingress, when set, exposes the address outside the cluster; dropIngress: one made before
	// goes.
	ingress     *ingress
	dropIngress string
}

// ingress is an Ingress of class (the cluster's default when empty) that routes requests for
// hosts to the address.
type ingress struct {
	name, class string
	hosts       []string
}

// versionPods are one model version's pods.
type versionPods struct {
	// template is the pods' labels (beyond the selector, which the engine adds), annotations and
	// spec.
	template corev1.PodTemplateSpec
	// model is the version's model URI without its secrets.
	model string
}

// of is the version named stable or canary (nil for a canary the endpoint does not have).
func (e *endpoint) of(v string) *versionPods {
	if v == canary {
		return e.canary
	}
	return &e.stable
}
