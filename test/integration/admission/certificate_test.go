package admission

// The webhooks' self-managed certificate: recreated, re-injected and healed by every replica.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kiln-ml/kiln/internal/admission"
	"github.com/kiln-ml/kiln/internal/devcluster"
	"github.com/kiln-ml/kiln/internal/servingcert"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

// TestCertificateIsRecreatedAndReinjected deletes the certificate Secret: kiln creates a new CA
// and serving certificate, injects the new bundle and serves the new certificate, and admission
// keeps working.
func TestCertificateIsRecreatedAndReinjected(t *testing.T) {
	ready(t)
	ctx := context.Background()
	key, old := deleteCertificate(t)
	testenv.EventuallyWithin(t, 30*time.Second, func() error {
		s := &corev1.Secret{}
		if err := env.Client.Get(ctx, key, s); err != nil {
			return err
		}
		if bytes.Equal(s.Data["ca.crt"], old.Data["ca.crt"]) {
			return fmt.Errorf("the CA was not replaced")
		}
		bundle, err := injectedBundle(ctx)
		if err != nil {
			return err
		}
		if !bytes.Equal(bundle, s.Data["ca.crt"]) {
			return fmt.Errorf("the webhook configurations do not carry the new CA bundle yet")
		}
		return nil
	})
	ready(t)
}

// deleteCertificate deletes the webhook certificate's Secret and returns its key and what it held.
func deleteCertificate(t *testing.T) (client.ObjectKey, *corev1.Secret) {
	t.Helper()
	key := client.ObjectKey{Namespace: devcluster.WebhookNamespace, Name: opts.Webhook.SecretName}
	old := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), key, old); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	return key, old
}

// injectedBundle is the CA bundle kiln injected into its two webhook configurations, the same in
// both.
func injectedBundle(ctx context.Context) ([]byte, error) {
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: admission.MutatingName}, m); err != nil {
		return nil, err
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: admission.ValidatingName}, v); err != nil {
		return nil, err
	}
	bundle := m.Webhooks[0].ClientConfig.CABundle
	if !bytes.Equal(bundle, v.Webhooks[0].ClientConfig.CABundle) {
		return nil, fmt.Errorf("the two webhook configurations carry different CA bundles")
	}
	return bundle, nil
}

// TestReplicasHealTheCertificateWithinSeconds runs a second replica that checks its certificate
// only every 10 minutes: it watches the Secret and the webhook configurations, so when the Secret
// is deleted both replicas serve a certificate of the new CA — once the webhook configurations
// have carried it for 3 s — within seconds, and admission goes on working. On an idle machine
// that takes about 4.5 s; with two `make test` at once it went past 10 s (by my reading, the
// writes of the bundle into the configurations and CRDs were that much slower). The bound is
// 30 s: far from the 10 minutes without the watches.
func TestReplicasHealTheCertificateWithinSeconds(t *testing.T) {
	ready(t)
	ctx := context.Background()
	addr, err := devcluster.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	o, err := devcluster.LocalWebhooks(testenv.ManagerOptions(), addr, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	stop, err := env.StartManager(o)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	first := net.JoinHostPort(opts.Webhook.Host, strconv.Itoa(opts.Webhook.Port))
	// Both replicas serve certificates of the CA in the webhook configurations.
	trusted := func() error {
		bundle, err := injectedBundle(ctx)
		if err != nil {
			return err
		}
		return servedFrom(bundle, first, addr)
	}
	testenv.EventuallyWithin(t, 30*time.Second, trusted)

	key, old := deleteCertificate(t)
	start := time.Now()
	testenv.EventuallyWithin(t, 30*time.Second, func() error {
		s := &corev1.Secret{}
		if err := env.Client.Get(ctx, key, s); err != nil {
			return err
		}
		if bytes.Equal(s.Data["ca.crt"], old.Data["ca.crt"]) {
			return fmt.Errorf("the CA was not replaced")
		}
		if err := trusted(); err != nil {
			return err
		}
		// The bundle holds the old CA too, for the switch: each replica serves the new one's.
		current, _ := pem.Decode(s.Data["ca.crt"])
		if current == nil {
			return fmt.Errorf("no new CA in the Secret")
		}
		return servedFrom(pem.EncodeToMemory(current), first, addr)
	})
	t.Logf("both replicas serve the new certificate %s after the Secret was deleted", time.Since(start).Round(100*time.Millisecond))
	job := builder.TFJob("after-heal", env.Namespace(t)).Replicas("Worker", 1).Obj()
	if err := env.Client.Create(ctx, job); err != nil {
		t.Fatalf("admission after the certificate was healed: %v", err)
	}
}

// servedFrom says whether the webhook servers at addrs each serve a certificate that one of the
// CAs of bundle signed.
func servedFrom(bundle []byte, addrs ...string) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		return fmt.Errorf("no CA in the bundle")
	}
	for _, a := range addrs {
		conn, err := tls.Dial("tcp", a, &tls.Config{RootCAs: pool})
		if err != nil {
			return fmt.Errorf("the replica at %s: %w", a, err)
		}
		conn.Close()
	}
	return nil
}

// TestReadyzIncludesTheWebhookServer reads the manager's /readyz checks.
func TestReadyzIncludesTheWebhookServer(t *testing.T) {
	ready(t)
	resp, err := http.Get("http://" + probeAddr + "/readyz?verbose=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "[+]webhooks ok") || !strings.Contains(string(body), "[+]caches ok") {
		t.Fatalf("/readyz answered %d:\n%s", resp.StatusCode, body)
	}
}

// TestAdmissionNeverFailsAcrossAHealing creates jobs in loops (dry run, through the webhooks;
// eight at a time, so the apiserver keeps opening connections, each a new TLS handshake) while
// the certificate Secret is deleted and made anew: the new CA reaches the webhook configurations
// before a certificate it signed is served, so no request fails.
func TestAdmissionNeverFailsAcrossAHealing(t *testing.T) {
	ready(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	addr := net.JoinHostPort(opts.Webhook.Host, strconv.Itoa(opts.Webhook.Port))
	var calls atomic.Int64
	stop := admitInLoops(func(w, i int) error {
		calls.Add(1)
		return env.Client.Create(ctx, builder.TFJob(fmt.Sprintf("loop-%d-%d", w, i), ns).Replicas("Worker", 1).Obj(), client.DryRunAll)
	}, func() (*x509.Certificate, error) { return servedLeaf(addr) }, func() ([]byte, error) { return injectedBundle(ctx) })
	time.Sleep(time.Second)
	key, old := deleteCertificate(t)
	testenv.EventuallyWithin(t, 30*time.Second, func() error {
		s := &corev1.Secret{}
		if err := env.Client.Get(ctx, key, s); err != nil {
			return err
		}
		current, _ := pem.Decode(s.Data["ca.crt"]) // the new CA comes first
		if bytes.Equal(s.Data["ca.crt"], old.Data["ca.crt"]) || current == nil {
			return fmt.Errorf("no new CA yet")
		}
		return servedFrom(pem.EncodeToMemory(current), net.JoinHostPort(opts.Webhook.Host, strconv.Itoa(opts.Webhook.Port)))
	})
	time.Sleep(2 * time.Second) // and a while after the switch
	if err := stop(); err != nil {
		t.Fatalf("admission failed across the healing: %v", err)
	}
	t.Logf("%d requests across the healing, none failed", calls.Load())
}

// admitInLoops sends requests through admission in 8 loops (create makes loop w's i-th) and, as
// fast as it goes, checks the order of a certificate change: the leaf served verifies against
// the bundle the webhook configurations carry. stop ends both and returns the first failure.
func admitInLoops(create func(w, i int) error, served func() (*x509.Certificate, error), bundle func() ([]byte, error)) (stop func() error) {
	done := make(chan struct{})
	errs := make(chan error, 9)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				if err := create(w, i); err != nil {
					errs <- fmt.Errorf("request %d of loop %d: %w", i, w, err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			leaf, err := served()
			if err != nil {
				continue
			}
			b, err := bundle()
			if err != nil {
				continue
			}
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(b)
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool}); err != nil {
				errs <- fmt.Errorf("a certificate was served before the webhook configurations carried its CA: %w", err)
				return
			}
		}
	})
	return func() error {
		close(done)
		wg.Wait()
		close(errs)
		return <-errs
	}
}

// servedLeaf is the certificate the server at addr serves.
func servedLeaf(addr string) (*x509.Certificate, error) {
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the caller checks the chain itself
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

// TestAFailedCheckIsRetriedWithinSeconds: a replica whose check fails while it heals (its read
// of the Secret refused once, as a loaded apiserver may) checks again within seconds, not at its
// next periodic check 10 minutes on: nothing else would wake it, as nobody else makes the Secret
// anew here. It makes the Secret and serves its certificate.
func TestAFailedCheckIsRetriedWithinSeconds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ns := env.Namespace(t)
	base, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	// The rotator's client: the next read that finds no Secret (the heal's) refused once armed, as
	// an apiserver that cannot answer in time does; watching closed once it watches Secrets.
	var refuse atomic.Bool
	watching := make(chan struct{})
	var watched sync.Once
	c := interceptor.NewClient(base, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			err := c.Get(ctx, key, obj, opts...)
			if _, secret := obj.(*corev1.Secret); secret && apierrors.IsNotFound(err) && refuse.CompareAndSwap(true, false) {
				return apierrors.NewServerTimeout(corev1.Resource("secrets"), "get", 1)
			}
			return err
		},
		Watch: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
			w, err := c.Watch(ctx, list, opts...)
			if _, secrets := list.(*corev1.SecretList); secrets && err == nil {
				watched.Do(func() { close(watching) })
			}
			return w, err
		},
	})
	key := client.ObjectKey{Namespace: ns, Name: "healing-cert"}
	rot := servingcert.New(c, env.Client, servingcert.Options{Namespace: ns, SecretName: key.Name,
		DNSNames: []string{"healing.example"}, CheckInterval: 10 * time.Minute, Watcher: c, Log: testenv.Logger()})
	stopped := make(chan error, 1)
	go func() { stopped <- rot.Start(ctx) }()
	defer func() { cancel(); <-stopped }()
	serving := func() ([]byte, error) {
		cert, err := rot.GetCertificate(nil)
		if err != nil {
			return nil, err
		}
		return cert.Certificate[0], nil
	}
	var first []byte
	testenv.EventuallyWithin(t, 30*time.Second, func() (err error) { first, err = serving(); return err })
	select { // the deletion is then an event the rotator hears
	case <-watching:
	case <-time.After(30 * time.Second):
		t.Fatal("the rotator never watched its Secret")
	}

	refuse.Store(true)
	old := &corev1.Secret{}
	if err := env.Client.Get(ctx, key, old); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	testenv.EventuallyWithin(t, 20*time.Second, func() error {
		leaf, err := serving()
		if err != nil {
			return err
		}
		if bytes.Equal(leaf, first) {
			return fmt.Errorf("still serving the certificate of the deleted Secret")
		}
		return nil
	})
	if refuse.Load() {
		t.Fatal("no read of the Secret was refused: the test tests nothing")
	}
	t.Logf("serving a certificate of the new Secret %s after the old one was deleted", time.Since(start).Round(100*time.Millisecond))
}
