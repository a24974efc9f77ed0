// Package v1alpha1 holds serving.kserve.io/v1alpha1 as kiln serves it: ServingRuntime and
// ClusterServingRuntime, field for field compatible with KServe v0.20, so KServe's own runtime
// manifests and its Python SDK work unchanged. kiln reads them to pick the model server of a
// serving.kserve.io/v1beta1 InferenceService.
// +kubebuilder:object:generate=true
// +groupName=serving.kserve.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is serving.kserve.io/v1alpha1.
	GroupVersion = schema.GroupVersion{Group: "serving.kserve.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this group version.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this group version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
