//go:build tools

// Package tools pins kwok and kwokctl, which play the kubelets of the local cluster.
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
	_ "sigs.k8s.io/kwok/cmd/kwokctl"
)
