//go:build tools

// Package tools pins scheduler-plugins' scheduler (with the Coscheduling plugin) and its PodGroup
// controller for the add-ons e2e suite (test/e2e/addons). Its replace block is scheduler-plugins'
// own: the Kubernetes release it builds against.
package tools

import (
	_ "sigs.k8s.io/scheduler-plugins/cmd/controller"
	_ "sigs.k8s.io/scheduler-plugins/cmd/scheduler"
)
