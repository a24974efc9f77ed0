//go:build tools

// Package tools pins KEDA's operator (with its CRDs) for the serving e2e suite (test/e2e), where
// it must accept the ScaledObjects kiln makes.
package tools

import _ "github.com/kedacore/keda/v2/cmd/operator"
