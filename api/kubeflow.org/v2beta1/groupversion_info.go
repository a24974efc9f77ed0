// Package v2beta1 holds the kubeflow.org/v2beta1 MPIJob, field for field mpi-operator v0.8's API,
// served beside kubeflow.org/v1 on the same CustomResourceDefinition. kiln stores MPIJobs at v1:
// conversion.go converts both ways without loss, through kiln's conversion webhook.
// +kubebuilder:object:generate=true
// +groupName=kubeflow.org
package v2beta1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is kubeflow.org/v2beta1.
	GroupVersion = schema.GroupVersion{Group: "kubeflow.org", Version: "v2beta1"}

	// SchemeBuilder registers the types of this group version.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this group version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
