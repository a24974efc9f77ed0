// Package v1beta1 holds serving.kiln.dev/v1beta1: InferenceService, one manifest for a model
// endpoint, with its fields grouped by what they are about (model, server, scaling, GPUs).
// It is the stored version; v1alpha1 is served beside it: conversion.go converts both ways
// without loss.
// +kubebuilder:object:generate=true
// +groupName=serving.kiln.dev
package v1beta1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is serving.kiln.dev/v1beta1.
	GroupVersion = schema.GroupVersion{Group: "serving.kiln.dev", Version: "v1beta1"}
	// SchemeBuilder registers the types of this group version.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds the types of this group version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
