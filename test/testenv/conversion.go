package testenv

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/kiln-ml/kiln/internal/conversion"
	"github.com/kiln-ml/kiln/internal/manager"
)

// serveConversion runs kiln's conversion webhook in the test process, at the address and with the
// certificate envtest pointed the CRDs of more than one version at (it does so for the kinds
// manager.Scheme can convert). Every suite can so read and write every served version, as in a
// cluster running kiln, whether or not its manager serves webhooks. A suite that installs the
// manager's webhooks points the CRDs at the manager instead, which converts the same way.
func serveConversion(o envtest.WebhookInstallOptions) (stop func(), _ error) {
	// The certificate is loaded once: a watcher of its folder would complain when envtest removes it.
	cert, err := tls.LoadX509KeyPair(filepath.Join(o.LocalServingCertDir, "tls.crt"), filepath.Join(o.LocalServingCertDir, "tls.key"))
	if err != nil {
		return nil, fmt.Errorf("reading envtest's serving certificate: %w", err)
	}
	srv := webhook.NewServer(webhook.Options{Host: o.LocalServingHost, Port: o.LocalServingPort,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) {
			c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &cert, nil }
		}}})
	conversion.Register(srv, manager.Scheme())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	stop = func() {
		cancel()
		<-done
	}
	addr := net.JoinHostPort(o.LocalServingHost, strconv.Itoa(o.LocalServingPort))
	dialer := &net.Dialer{Timeout: time.Second}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		conn, err := tls.DialWithDialer(dialer, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only: is it listening
		if err == nil {
			_ = conn.Close()
			return stop, nil
		}
		select {
		case err := <-done:
			cancel()
			return nil, fmt.Errorf("serving the conversion webhook at %s: %w", addr, err)
		default:
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("the conversion webhook did not listen at %s within 30s: %w", addr, err)
		}
	}
}
