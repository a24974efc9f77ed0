//go:build tools

// Package tools pins controller-gen, which generates kiln's CRDs, RBAC and deepcopy code.
package tools

import _ "sigs.k8s.io/controller-tools/cmd/controller-gen"
