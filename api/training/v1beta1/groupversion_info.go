// Package v1beta1 holds training.kiln.dev/v1beta1: PyJob, one manifest for a training run, with
// its fields grouped by what they are about (dataset, output, GPUs, pod). It is the stored
// version; v1alpha1 is served beside it: conversion.go converts both ways without loss.
// +kubebuilder:object:generate=true
// +groupName=training.kiln.dev
package v1beta1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is training.kiln.dev/v1beta1.
	GroupVersion = schema.GroupVersion{Group: "training.kiln.dev", Version: "v1beta1"}
	// SchemeBuilder registers the types of this group version.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds the types of this group version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
