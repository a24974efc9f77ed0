// Package v1alpha1 holds training.kiln.dev/v1alpha1: PyJob, one manifest for a training run.
// +kubebuilder:object:generate=true
// +groupName=training.kiln.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is training.kiln.dev/v1alpha1.
	GroupVersion = schema.GroupVersion{Group: "training.kiln.dev", Version: "v1alpha1"}
	// SchemeBuilder registers the types of this group version.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds the types of this group version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
