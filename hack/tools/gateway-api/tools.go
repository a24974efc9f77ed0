//go:build tools

// Package tools pins the Gateway API release whose CRDs kiln's InferenceService tests install.
package tools

import _ "sigs.k8s.io/gateway-api/apis/v1"
