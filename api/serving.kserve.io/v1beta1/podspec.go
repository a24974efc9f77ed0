package v1beta1

import corev1 "k8s.io/api/core/v1"

// PodSpec is a pod spec whose containers may be left out: a predictor's pod fields beside a
// framework or model that brings its own container. Fields and names are corev1.PodSpec's, as
// KServe's v1beta1 has them.
type PodSpec struct {
	// +optional
	Volumes []corev1.Volume `json:"volumes,omitempty"`
	// +optional
	InitContainers []corev1.Container `json:"initContainers,omitempty"`
	// Containers of the predictor: with a framework or model, any named kserve-container is
	// merged over the runtime's; without one, they are a custom predictor, kserve-container (or
	// the first) serving the model.
	// +optional
	Containers []corev1.Container `json:"containers,omitempty"`
	// +optional
	EphemeralContainers []corev1.EphemeralContainer `json:"ephemeralContainers,omitempty"`
	// +optional
	RestartPolicy corev1.RestartPolicy `json:"restartPolicy,omitempty"`
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=31536000
	// +optional
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3153600000
	// +optional
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`
	// +optional
	DNSPolicy corev1.DNSPolicy `json:"dnsPolicy,omitempty"`
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// DeprecatedServiceAccount is serviceAccountName's old spelling.
	// +optional
	DeprecatedServiceAccount string `json:"serviceAccount,omitempty"`
	// +optional
	AutomountServiceAccountToken *bool `json:"automountServiceAccountToken,omitempty"`
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// +optional
	HostNetwork bool `json:"hostNetwork,omitempty"`
	// +optional
	HostPID bool `json:"hostPID,omitempty"`
	// +optional
	HostIPC bool `json:"hostIPC,omitempty"`
	// +optional
	ShareProcessNamespace *bool `json:"shareProcessNamespace,omitempty"`
	// +optional
	SecurityContext *corev1.PodSecurityContext `json:"securityContext,omitempty"`
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
	// +optional
	Hostname string `json:"hostname,omitempty"`
	// +optional
	Subdomain string `json:"subdomain,omitempty"`
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// +optional
	SchedulerName string `json:"schedulerName,omitempty"`
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// +optional
	HostAliases []corev1.HostAlias `json:"hostAliases,omitempty"`
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// +optional
	Priority *int32 `json:"priority,omitempty"`
	// +optional
	DNSConfig *corev1.PodDNSConfig `json:"dnsConfig,omitempty"`
	// +optional
	ReadinessGates []corev1.PodReadinessGate `json:"readinessGates,omitempty"`
	// +optional
	RuntimeClassName *string `json:"runtimeClassName,omitempty"`
	// +optional
	EnableServiceLinks *bool `json:"enableServiceLinks,omitempty"`
	// +optional
	PreemptionPolicy *corev1.PreemptionPolicy `json:"preemptionPolicy,omitempty"`
	// +optional
	Overhead corev1.ResourceList `json:"overhead,omitempty"`
	// +optional
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
	// +optional
	SetHostnameAsFQDN *bool `json:"setHostnameAsFQDN,omitempty"`
	// +optional
	OS *corev1.PodOS `json:"os,omitempty"`
	// +optional
	HostUsers *bool `json:"hostUsers,omitempty"`
	// +optional
	SchedulingGates []corev1.PodSchedulingGate `json:"schedulingGates,omitempty"`
	// +optional
	ResourceClaims []corev1.PodResourceClaim `json:"resourceClaims,omitempty"`
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// +optional
	HostnameOverride *string `json:"hostnameOverride,omitempty"`
}
