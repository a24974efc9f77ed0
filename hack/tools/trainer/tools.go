//go:build tools

// Package tools pins Kubeflow Trainer v2's release: its runtime manifests, which kiln's tests
// apply unchanged, and its controller, which only the benchmark runs, beside kiln, to compare
// them (it is never part of kiln).
package tools

import _ "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"
