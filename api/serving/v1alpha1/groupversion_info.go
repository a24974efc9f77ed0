// Package v1alpha1 holds serving.kiln.dev/v1alpha1: InferenceService, one manifest for a model
// endpoint.
// +kubebuilder:object:generate=true
// +groupName=serving.kiln.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is serving.kiln.dev/v1alpha1.
	GroupVersion = schema.GroupVersion{Group: "serving.kiln.dev", Version: "v1alpha1"}
	// SchemeBuilder registers the types of this group version.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds the types of this group version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
