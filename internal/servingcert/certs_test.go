package servingcert

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var (
	t0   = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	year = 365 * 24 * time.Hour
	opts = Options{DNSNames: []string{"kiln-webhook.kiln-system.svc"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, CertValidity: year}
)

// verifies checks that the serving certificate chains to the bundle and names dns at now.
func verifies(t *testing.T, data map[string][]byte, dns string, now time.Time) {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data[caCertKey]) {
		t.Fatal("ca.crt holds no certificate")
	}
	leaf := parseCerts(data[corev1.TLSCertKey])
	if len(leaf) != 1 {
		t.Fatalf("tls.crt holds %d certificates, want 1", len(leaf))
	}
	if _, err := leaf[0].Verify(x509.VerifyOptions{Roots: pool, DNSName: dns, CurrentTime: now}); err != nil {
		t.Fatalf("serving certificate does not verify for %s at %s: %v", dns, now, err)
	}
	if _, err := tlsKeyPair(data); err != nil {
		t.Fatalf("tls.crt and tls.key do not match: %v", err)
	}
}

func mustRenew(t *testing.T, data map[string][]byte, now time.Time, o Options) (map[string][]byte, bool) {
	t.Helper()
	out, changed, err := renew(data, nil, now, o)
	if err != nil {
		t.Fatal(err)
	}
	return out, changed
}

func TestRenew(t *testing.T) {
	first, changed := mustRenew(t, nil, t0, opts)
	if !changed {
		t.Fatal("an empty Secret was not filled")
	}
	verifies(t, first, "kiln-webhook.kiln-system.svc", t0)

	if _, changed := mustRenew(t, first, t0.Add(year/2), opts); changed {
		t.Error("renewed a serving certificate with half its lifetime left")
	}

	late, changed := mustRenew(t, first, t0.Add(year*3/4), opts)
	if !changed || bytes.Equal(late[corev1.TLSCertKey], first[corev1.TLSCertKey]) {
		t.Fatal("did not renew a serving certificate with a quarter of its lifetime left")
	}
	if !bytes.Equal(late[caKeyKey], first[caKeyKey]) {
		t.Error("renewing the serving certificate replaced the CA")
	}
	verifies(t, late, "kiln-webhook.kiln-system.svc", t0.Add(year*3/4))

	moved := opts
	moved.DNSNames = []string{"kiln-webhook.other.svc"}
	renamed, changed := mustRenew(t, first, t0, moved)
	if !changed {
		t.Fatal("a serving certificate for other names was kept")
	}
	verifies(t, renamed, "kiln-webhook.other.svc", t0)

	// The CA is due after two thirds of its ten years: a new one signs, the old one stays in
	// the bundle while it is valid, so certificates it signed still verify.
	caDue := t0.Add(7 * year)
	rotated, changed := mustRenew(t, first, caDue, opts)
	if !changed || bytes.Equal(rotated[caKeyKey], first[caKeyKey]) {
		t.Fatal("did not replace a CA with less than a third of its lifetime left")
	}
	if n := len(parseCerts(rotated[caCertKey])); n != 2 {
		t.Errorf("bundle after CA renewal holds %d CAs, want the new and the old one", n)
	}
	verifies(t, rotated, "kiln-webhook.kiln-system.svc", caDue)
	oldServing := map[string][]byte{caCertKey: rotated[caCertKey], corev1.TLSCertKey: late[corev1.TLSCertKey], corev1.TLSPrivateKeyKey: late[corev1.TLSPrivateKeyKey]}
	verifies(t, oldServing, "kiln-webhook.kiln-system.svc", t0.Add(year*3/4))

	garbage := map[string][]byte{caCertKey: []byte("x"), caKeyKey: []byte("y"), corev1.TLSCertKey: []byte("z")}
	fixed, changed := mustRenew(t, garbage, t0, opts)
	if !changed {
		t.Fatal("kept unparsable Secret data")
	}
	verifies(t, fixed, "kiln-webhook.kiln-system.svc", t0)
}

// A Secret made anew (deleted, say) keeps trusting the CAs this process last injected, after the
// new one: the apiserver still trusts them while the new bundle reaches it.
func TestRenewKeepsTrustedCAs(t *testing.T) {
	first, _ := mustRenew(t, nil, t0, opts)
	was := parseCerts(first[caCertKey])
	healed, changed, err := renew(nil, was, t0.Add(time.Hour), opts)
	if err != nil || !changed {
		t.Fatalf("renew: %v, changed %v", err, changed)
	}
	cas := parseCerts(healed[caCertKey])
	if len(cas) != 2 || cas[0].Equal(was[0]) || !cas[1].Equal(was[0]) {
		t.Fatalf("bundle of %d CAs, want the new one first and the old one after", len(cas))
	}
	verifies(t, healed, "kiln-webhook.kiln-system.svc", t0.Add(time.Hour))
}

// A check that keeps failing is retried at 5 s, then less often, up to a minute (or the check
// interval, if shorter); a watch that cannot start, at 1 s, then less often, up to a minute.
func TestRetriesBackOff(t *testing.T) {
	for _, c := range []struct {
		name string
		got  time.Duration
		want time.Duration
	}{
		{"check, 1st failure", retryIn(1, 10*time.Minute), 5 * time.Second},
		{"check, 2nd", retryIn(2, 10*time.Minute), 10 * time.Second},
		{"check, 4th", retryIn(4, 10*time.Minute), 40 * time.Second},
		{"check, 5th", retryIn(5, 10*time.Minute), time.Minute},
		{"check, 1000th", retryIn(1000, 10*time.Minute), time.Minute},
		{"check, 3rd, CheckInterval 15s", retryIn(3, 15*time.Second), 15 * time.Second},
		{"check, 1st, CheckInterval 2s", retryIn(1, 2*time.Second), 2 * time.Second},
		{"watch, 1st", backoff(watchRetryInterval, 1, maxRetryInterval), time.Second},
		{"watch, 3rd", backoff(watchRetryInterval, 3, maxRetryInterval), 4 * time.Second},
		{"watch, 7th", backoff(watchRetryInterval, 7, maxRetryInterval), time.Minute},
	} {
		if c.got != c.want {
			t.Errorf("%s: waits %s, want %s", c.name, c.got, c.want)
		}
	}
}

// refusedWatches refuses every watch, as an apiserver that is down does, and counts them.
type refusedWatches struct {
	client.WithWatch
	tries atomic.Int32
}

func (r *refusedWatches) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	r.tries.Add(1)
	return nil, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
}

// While the apiserver is down, a watch is tried again less and less often, not every second.
func TestAWatchThatCannotStartBacksOff(t *testing.T) {
	w := &refusedWatches{}
	r := New(nil, nil, Options{Watcher: w, Log: logr.Discard()})
	ctx, cancel := context.WithTimeout(context.Background(), 7500*time.Millisecond)
	defer cancel()
	r.watch(ctx, &corev1.SecretList{}, make(chan struct{}, 1))
	// Tried at 0, 1, 3 and 7 s; once a second would be 8 tries. A busy machine makes fewer.
	if n := w.tries.Load(); n < 2 || n > 4 {
		t.Errorf("a watch refused for 7.5 s was tried %d times, want 2 to 4", n)
	}
}
