//go:build tools

// Package tools pins JobSet's controller (with its CRD and webhook configurations): kiln runs a
// TrainJob as a JobSet, and the local cluster, the e2e suites and the benchmark run the real
// JobSet controller beside kiln.
package tools

import _ "sigs.k8s.io/jobset"
