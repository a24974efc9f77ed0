// Package v1alpha1 holds trainer.kubeflow.org/v1alpha1, Kubeflow Trainer v2's API as kiln serves
// it: TrainJob, TrainingRuntime and ClusterTrainingRuntime, field for field compatible with
// Kubeflow Trainer v2.3, so its manifests and the Kubeflow Python SDK v2 work unchanged.
// +kubebuilder:object:generate=true
// +groupName=trainer.kubeflow.org
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is trainer.kubeflow.org/v1alpha1.
	GroupVersion = schema.GroupVersion{Group: "trainer.kubeflow.org", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this group version.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this group version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
