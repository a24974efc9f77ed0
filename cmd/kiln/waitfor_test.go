package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/kiln-ml/kiln/internal/version"
)

func TestWaitForHost(t *testing.T) {
	if err := waitForHost(context.Background(), net.DefaultResolver, "localhost", 1, time.Millisecond); err != nil {
		t.Errorf("localhost: %v", err)
	}
	// .invalid never resolves (RFC 6761).
	err := waitForHost(context.Background(), net.DefaultResolver, "master.invalid", 2, time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "master.invalid did not resolve after 2 tries") {
		t.Errorf("an unresolvable host: err = %v", err)
	}
}

// kiln's binary links the Kubernetes libraries `kiln version` names.
func TestVersionNamesTheKubernetesLibraries(t *testing.T) {
	out := version.String()
	for _, want := range []string{"k8s.io/api v0.", "k8s.io/client-go v0.", "sigs.k8s.io/controller-runtime v0."} {
		if !strings.Contains(out, want) {
			t.Errorf("kiln version lacks %s:\n%s", want, out)
		}
	}
}
