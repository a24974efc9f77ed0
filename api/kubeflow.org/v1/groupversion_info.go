// Package v1 holds the kubeflow.org/v1 training-job API that kiln serves: TFJob, PyTorchJob and
// XGBoostJob, field for field compatible with Kubeflow Training Operator v1.9.
// +kubebuilder:object:generate=true
// +groupName=kubeflow.org
package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is kubeflow.org/v1.
	GroupVersion = schema.GroupVersion{Group: "kubeflow.org", Version: "v1"}

	// SchemeBuilder registers the types of this group version.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this group version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
