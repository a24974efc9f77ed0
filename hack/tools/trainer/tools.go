//go:build tools

// Package tools pins Kubeflow Trainer v2's release whose runtime manifests kiln's tests apply
// unchanged (Trainer's own controller is never part of kiln).
package tools

import _ "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
