// Package v1beta1 holds serving.kserve.io/v1beta1 as kiln serves it: KServe's InferenceService,
// field for field compatible with KServe v0.20 in its Standard (RawDeployment) mode, so KServe's
// manifests and its Python SDK work unchanged. kiln serves the predictor (its framework
// shorthands, the model form with ServingRuntimes, and v0.20's canaries); the parts KServe runs
// elsewhere — transformers, explainers, multi-node workers — are refused naming the field.
// +kubebuilder:object:generate=true
// +groupName=serving.kserve.io
package v1beta1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is serving.kserve.io/v1beta1.
	GroupVersion = schema.GroupVersion{Group: "serving.kserve.io", Version: "v1beta1"}

	// SchemeBuilder registers the types of this group version.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this group version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
