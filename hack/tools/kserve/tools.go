//go:build tools

// Package tools pins KServe's release: its runtime manifests and samples, which kiln's tests apply
// unchanged to kiln's serving.kserve.io API, and its manager, which only the benchmark runs, beside
// kiln, to compare them (it is never part of kiln).
package tools

import _ "github.com/kserve/kserve/cmd/manager"
