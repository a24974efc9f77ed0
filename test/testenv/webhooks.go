package testenv

import (
	"context"
	"testing"

	"github.com/kiln-ml/kiln/internal/devcluster"
	"github.com/kiln-ml/kiln/internal/manager"
)

// FreeAddr is a 127.0.0.1 address with a port nobody listens on (for a moment).
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := devcluster.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// InstallWebhooks creates kiln's webhook configurations for the kinds and webhook address of o
// (see devcluster.LocalWebhooks); kiln injects their CA bundle.
func (e *Env) InstallWebhooks(o manager.Options) error {
	return devcluster.InstallWebhooks(context.Background(), e.Client, o)
}

// UninstallWebhooks deletes kiln's webhook configurations.
func (e *Env) UninstallWebhooks() error {
	return devcluster.UninstallWebhooks(context.Background(), e.Client)
}
