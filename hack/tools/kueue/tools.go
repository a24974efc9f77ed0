//go:build tools

// Package tools pins Kueue's manager (with its CRDs and webhook configurations) for the add-ons
// e2e suite (test/e2e/addons), where it queues kiln's jobs.
package tools

import _ "sigs.k8s.io/kueue/cmd/kueue"
