// Package podsecurity holds the securityContext of the containers kiln adds to users' pods (the
// PyTorch workers' wait for the master, the model fetch, MPI's kubectl delivery): they pass the
// Pod Security Standard "restricted", so kiln's additions never make a pod refused where a
// namespace enforces it. Users' own containers are left as they wrote them.
package podsecurity

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// NonRootUser is the user kiln's image runs as (distroless "nonroot").
const NonRootUser = 65532

// Restricted is a container securityContext that meets "restricted": a non-root user, no
// privilege escalation, no capabilities, the runtime's default seccomp profile, and a read-only
// root filesystem (kiln's containers write only to the volumes they mount).
func Restricted() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		RunAsUser:                ptr.To[int64](NonRootUser),
		RunAsGroup:               ptr.To[int64](NonRootUser),
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}
