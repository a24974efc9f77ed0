//go:build tools

// Package tools pins Istio's API release, whose CRDs (VirtualService and the rest) kiln's
// InferenceService tests install: kiln splits a canary with a VirtualService where Istio runs.
package tools

import _ "istio.io/api/networking/v1"
