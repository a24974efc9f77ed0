// Package servingcert keeps the webhook server's TLS certificate without outside help: a CA and a
// serving certificate in one Secret (created by whichever replica comes first, renewed before
// expiry), the CA bundle injected into kiln's webhook configurations, and the current certificate
// handed to the TLS server from memory, so no file has to be written or mounted.
package servingcert

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"reflect"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options say where the certificate lives, whom it names and whom it is injected into.
type Options struct {
	// Namespace and SecretName locate the Secret (type kubernetes.io/tls plus ca.crt and ca.key).
	Namespace, SecretName string
	// DNSNames and IPAddresses are the names the apiserver uses to reach the webhook server.
	DNSNames    []string
	IPAddresses []net.IP
	// MutatingWebhooks and ValidatingWebhooks name the configurations whose caBundle is kept.
	MutatingWebhooks, ValidatingWebhooks []string
	// ConversionCRDs name the CustomResourceDefinitions whose conversion webhook's caBundle is
	// kept. A CRD calling a Service of the name ConversionService is pointed at the one in
	// Namespace: a CRD ships for kiln's default namespace (a Helm chart cannot template its CRDs).
	ConversionCRDs    []string
	ConversionService string
	// CertValidity is the serving certificate's lifetime (default a year); the CA lives ten times
	// as long. Either is renewed once less than a third of its lifetime is left.
	CertValidity time.Duration
	// CheckInterval is how often the Secret and the webhook configurations are checked (default 10m).
	CheckInterval time.Duration
	// Watcher, when set, watches the Secret and the webhook configurations (each by its name):
	// a change to any of them — the Secret deleted or replaced, a caBundle edited — is checked at
	// once, so every replica converges on the same certificate within seconds.
	Watcher client.WithWatch
	Clock   clock.PassiveClock
	Log     logr.Logger
}

// Rotator keeps the Secret, the caBundles and the served certificate current.
//
// A new CA reaches the apiserver before a certificate it signed is served: the bundle first,
// the certificate second. A renewal or a Secret made anew brings a bundle of the new CA and the
// ones still trusted; every replica injects it, and serves the new certificate only once it has
// seen the webhook configurations hold a bundle with its CA for bundleGrace (the apiserver reads
// them through a watch of its own). Until then it serves the certificate it has.
type Rotator struct {
	reader  client.Reader
	writer  client.Writer
	opts    Options
	current atomic.Pointer[tls.Certificate]
	// Kept by Start's loop alone: the bundle the configurations hold and since when this
	// process saw it (bundleAt), the CAs of a bundle held at least bundleGrace (settled), and
	// how soon a certificate waiting for its CA to settle is to be looked at again (switchIn),
	// and whether a CRD did not take the bundle (crdsPending: looked at again in retryInterval).
	bundle      []byte
	bundleAt    time.Time
	settled     []*x509.Certificate
	switchIn    time.Duration
	crdsPending bool
}

// bundleGrace is how long the webhook configurations hold a bundle before a certificate of its
// CA is served: the time the apiserver takes to see the new configurations, with room to spare.
const bundleGrace = 3 * time.Second

// New returns a rotator that reads with reader (uncached: kiln does not watch Secrets) and writes
// with writer.
func New(reader client.Reader, writer client.Writer, opts Options) *Rotator {
	if opts.CertValidity <= 0 {
		opts.CertValidity = 365 * 24 * time.Hour
	}
	if opts.CheckInterval <= 0 {
		opts.CheckInterval = 10 * time.Minute
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Rotator{reader: reader, writer: writer, opts: opts}
}

// GetCertificate is the TLS server's certificate callback.
func (r *Rotator) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c := r.current.Load()
	if c == nil {
		return nil, fmt.Errorf("no webhook serving certificate loaded yet from Secret %s/%s", r.opts.Namespace, r.opts.SecretName)
	}
	return c, nil
}

// NeedLeaderElection is false: every replica serves webhooks, so every replica keeps its certificate.
func (r *Rotator) NeedLeaderElection() bool { return false }

// retryInterval is how soon a failed check is retried, doubling while checks keep failing up to
// maxRetryInterval (or CheckInterval, if shorter), and how soon a CRD that did not take the
// bundle is looked at again. Until the first check succeeds the webhook server has no
// certificate and /readyz fails; after that, a failed check may have cut short a heal that no
// watch event would resume before CheckInterval.
const (
	retryInterval    = 5 * time.Second
	maxRetryInterval = time.Minute
)

// watchRetryInterval is how soon a watch that could not start is tried again, doubling while it
// keeps failing up to maxRetryInterval: an apiserver away for a minute costs each watch a few
// log lines, not sixty.
const watchRetryInterval = time.Second

// retryIn is how long to wait after the failures-th check in a row failed (1: the first).
func retryIn(failures int, checkInterval time.Duration) time.Duration {
	return backoff(retryInterval, failures, min(maxRetryInterval, checkInterval))
}

// backoff is how long to wait after the failures-th failure in a row (1: the first): first,
// doubling each time, at most most.
func backoff(first time.Duration, failures int, most time.Duration) time.Duration {
	return min(first<<min(failures-1, 8), most)
}

// Start checks at once, then whenever a watched object changes and every CheckInterval, until
// ctx ends. Errors are logged and retried.
func (r *Rotator) Start(ctx context.Context) error {
	changed := make(chan struct{}, 1)
	if r.opts.Watcher != nil {
		go r.watch(ctx, &corev1.SecretList{}, changed, client.InNamespace(r.opts.Namespace), byName(r.opts.SecretName))
		for _, name := range r.opts.MutatingWebhooks {
			go r.watch(ctx, &admissionregistrationv1.MutatingWebhookConfigurationList{}, changed, byName(name))
		}
		for _, name := range r.opts.ValidatingWebhooks {
			go r.watch(ctx, &admissionregistrationv1.ValidatingWebhookConfigurationList{}, changed, byName(name))
		}
		for _, name := range r.opts.ConversionCRDs {
			go r.watch(ctx, &apiextensionsv1.CustomResourceDefinitionList{}, changed, byName(name))
		}
	}
	failures := 0
	for {
		wait := r.opts.CheckInterval
		if err := r.Ensure(ctx); err != nil {
			failures++
			wait = retryIn(failures, r.opts.CheckInterval)
			r.opts.Log.Error(err, "Checking the webhook serving certificate failed; retrying", "in", wait.String())
		} else {
			failures = 0
		}
		if r.switchIn > 0 {
			wait = min(wait, r.switchIn)
		}
		if r.crdsPending {
			wait = min(wait, retryInterval)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-time.After(wait):
		}
	}
}

func byName(name string) client.ListOption { return client.MatchingFields{"metadata.name": name} }

// watch signals changed on every change to the objects list selects, watching again (and
// signalling, as it may have missed one) when the watch ends.
func (r *Rotator) watch(ctx context.Context, list client.ObjectList, changed chan<- struct{}, opts ...client.ListOption) {
	signal := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	failures := 0
	for ctx.Err() == nil {
		wait := watchRetryInterval
		w, err := r.opts.Watcher.Watch(ctx, list, opts...)
		if err != nil {
			failures++
			wait = backoff(watchRetryInterval, failures, maxRetryInterval)
			r.opts.Log.Error(err, "Watching for webhook certificate changes failed; retrying", "kind", fmt.Sprintf("%T", list), "in", wait.String())
		} else {
			failures = 0
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					break
				}
				signal()
			}
			w.Stop()
			signal()
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// Ensure makes the Secret hold a valid CA and serving certificate, loads the certificate and
// injects the CA bundle. Replicas race safely: a lost create or update re-reads the winner's.
func (r *Rotator) Ensure(ctx context.Context) error {
	var data map[string][]byte
	var err error
	for range 3 {
		if data, err = r.ensureSecret(ctx); err == nil || !(apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)) {
			break
		}
	}
	if err != nil {
		return err
	}
	cert, err := tlsKeyPair(data)
	if err != nil {
		return fmt.Errorf("Secret %s/%s holds an unusable serving certificate: %w", r.opts.Namespace, r.opts.SecretName, err)
	}
	installed, pending, err := r.inject(ctx, data[caCertKey])
	if err != nil {
		return err
	}
	r.crdsPending = pending
	now := r.opts.Clock.Now()
	if !bytes.Equal(data[caCertKey], r.bundle) {
		r.bundle, r.bundleAt = data[caCertKey], now
	}
	if now.Sub(r.bundleAt) >= bundleGrace {
		r.settled = parseCerts(r.bundle)
	}
	r.switchIn = 0
	if old := r.current.Load(); old == nil || !installed || signedByOneOf(cert.Leaf, r.settled) {
		r.current.Store(&cert)
		return nil
	}
	if !sameLeaf(r.current.Load(), &cert) {
		r.switchIn = r.bundleAt.Add(bundleGrace).Sub(now)
		r.opts.Log.Info("Serving the renewed webhook certificate once the apiserver has its CA", "in", r.switchIn.String())
	}
	return nil
}

// signedByOneOf says whether one of cas signed leaf.
func signedByOneOf(leaf *x509.Certificate, cas []*x509.Certificate) bool {
	return leaf != nil && slices.ContainsFunc(cas, func(ca *x509.Certificate) bool { return leaf.CheckSignatureFrom(ca) == nil })
}

func sameLeaf(a, b *tls.Certificate) bool {
	return a != nil && b != nil && len(a.Certificate) > 0 && len(b.Certificate) > 0 && bytes.Equal(a.Certificate[0], b.Certificate[0])
}

func (r *Rotator) ensureSecret(ctx context.Context) (map[string][]byte, error) {
	key := types.NamespacedName{Namespace: r.opts.Namespace, Name: r.opts.SecretName}
	var secret corev1.Secret
	err := r.reader.Get(ctx, key, &secret)
	if err != nil && !apierrors.IsNotFound(err) {
		if apierrors.IsForbidden(err) {
			return nil, fmt.Errorf("reading the webhook certificate Secret %s: %w (kiln's Role in its namespace must allow get on it)", key, err)
		}
		return nil, fmt.Errorf("reading the webhook certificate Secret %s: %w", key, err)
	}
	exists := err == nil
	trusted := parseCerts(r.bundle)
	if !exists && len(trusted) == 0 {
		// A Secret to make anew, and this process has not injected a bundle yet (it just
		// started): keep trusting what the apiserver trusts now, as the other replicas serve it.
		trusted = parseCerts(r.injectedBundle(ctx))
	}
	data, changed, err := renew(secret.Data, trusted, r.opts.Clock.Now(), r.opts)
	if err != nil || !changed {
		return data, err
	}
	secret.Data = data
	if exists {
		r.opts.Log.Info("Renewing the webhook serving certificate", "secret", key)
		return data, r.writer.Update(ctx, &secret)
	}
	secret = corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: map[string]string{"app.kubernetes.io/name": "kiln"}},
		Type:       corev1.SecretTypeTLS,
		Data:       data,
	}
	r.opts.Log.Info("Creating the webhook serving certificate", "secret", key)
	return data, r.writer.Create(ctx, &secret)
}

// injectedBundle is the CA bundle of the first of kiln's webhook configurations that has one,
// or nil.
func (r *Rotator) injectedBundle(ctx context.Context) []byte {
	for _, name := range r.opts.MutatingWebhooks {
		c := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if r.reader.Get(ctx, types.NamespacedName{Name: name}, c) == nil && len(c.Webhooks) > 0 {
			return c.Webhooks[0].ClientConfig.CABundle
		}
	}
	for _, name := range r.opts.ValidatingWebhooks {
		c := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if r.reader.Get(ctx, types.NamespacedName{Name: name}, c) == nil && len(c.Webhooks) > 0 {
			return c.Webhooks[0].ClientConfig.CABundle
		}
	}
	for _, name := range r.opts.ConversionCRDs {
		c := &apiextensionsv1.CustomResourceDefinition{}
		if r.reader.Get(ctx, types.NamespacedName{Name: name}, c) == nil {
			if cc := conversionClient(c); cc != nil && len(cc.CABundle) > 0 {
				return cc.CABundle
			}
		}
	}
	return nil
}

// conversionClient is how the apiserver reaches the CRD's conversion webhook; nil when it has none.
func conversionClient(c *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.WebhookClientConfig {
	if cv := c.Spec.Conversion; cv != nil && cv.Webhook != nil {
		return cv.Webhook.ClientConfig
	}
	return nil
}

// inject writes bundle into every webhook of the named configurations; missing ones are skipped
// (webhooks not installed), so kiln still runs without them. installed says one exists. A CRD
// that could not take it is logged and makes pending true: the caller tries again soon.
func (r *Rotator) inject(ctx context.Context, bundle []byte) (installed, pending bool, _ error) {
	for _, name := range r.opts.MutatingWebhooks {
		c := &admissionregistrationv1.MutatingWebhookConfiguration{}
		found, err := r.injectInto(ctx, name, c, func() (changed bool) {
			for i := range c.Webhooks {
				changed = setBundle(&c.Webhooks[i].ClientConfig, bundle) || changed
			}
			return changed
		})
		if err != nil {
			return false, false, err
		}
		installed = installed || found
	}
	for _, name := range r.opts.ValidatingWebhooks {
		c := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		found, err := r.injectInto(ctx, name, c, func() (changed bool) {
			for i := range c.Webhooks {
				changed = setBundle(&c.Webhooks[i].ClientConfig, bundle) || changed
			}
			return changed
		})
		if err != nil {
			return false, false, err
		}
		installed = installed || found
	}
	for _, name := range r.opts.ConversionCRDs {
		c := &apiextensionsv1.CustomResourceDefinition{}
		found, err := r.injectInto(ctx, name, c, func() (changed bool) {
			cc := conversionClient(c)
			if cc == nil {
				return false
			}
			if svc := cc.Service; svc != nil && svc.Name == r.opts.ConversionService && svc.Namespace != r.opts.Namespace {
				svc.Namespace, changed = r.opts.Namespace, true
			}
			if !bytes.Equal(cc.CABundle, bundle) {
				cc.CABundle, changed = bundle, true
			}
			return changed
		})
		if err != nil {
			// Only requests at a version not stored need it: the admission webhooks must not
			// wait for it.
			r.opts.Log.Error(err, "Injecting the CA bundle into a CRD's conversion webhook failed; retrying", "crd", name, "in", retryInterval.String())
			pending = true
			continue
		}
		installed = installed || found
	}
	return installed, pending, nil
}

// injectInto reads configuration name into c, lets set change it and writes it when it changed;
// found says it exists. A write that lost to another writer (the apiserver's own status of a
// CRD, another replica) is made again on what that one wrote.
func (r *Rotator) injectInto(ctx context.Context, name string, c client.Object, set func() bool) (found bool, _ error) {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		found = false
		if err := r.reader.Get(ctx, types.NamespacedName{Name: name}, c); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("reading %s %s: %w", kindOf(c), name, err)
		}
		found = true
		if !set() {
			return nil
		}
		r.opts.Log.Info("Injecting the webhook CA bundle", "kind", kindOf(c), "name", name)
		return r.writer.Update(ctx, c)
	})
	if err != nil && found {
		return true, fmt.Errorf("injecting the CA bundle into %s %s: %w", kindOf(c), name, err)
	}
	return found, err
}

// kindOf is the kind of a typed object, e.g. CustomResourceDefinition.
func kindOf(c client.Object) string { return reflect.TypeOf(c).Elem().Name() }

func setBundle(cc *admissionregistrationv1.WebhookClientConfig, bundle []byte) bool {
	if bytes.Equal(cc.CABundle, bundle) {
		return false
	}
	cc.CABundle = bundle
	return true
}

// NewFileBundle keeps the CRDs of opts.ConversionCRDs trusting the CA in file (ca.crt of a
// certificate someone else keeps, such as cert-manager's, mounted with the serving certificate)
// and calling opts.ConversionService in opts.Namespace, as a Rotator does with its own CA. It
// checks at once, whenever a CRD changes (opts.Watcher), within filePoll of the file changing (a
// renewed self-signed certificate is a new CA, served at once from the same folder) and every
// CheckInterval.
func NewFileBundle(reader client.Reader, writer client.Writer, file string, opts Options) *FileBundle {
	opts.MutatingWebhooks, opts.ValidatingWebhooks = nil, nil
	return &FileBundle{r: New(reader, writer, opts), file: file}
}

// FileBundle injects a CA bundle read from a file into the conversion webhook of CRDs.
type FileBundle struct {
	r    *Rotator
	file string
}

// filePoll is how often FileBundle reads its file for a new CA.
const filePoll = 2 * time.Second

// NeedLeaderElection is false: every replica serves the webhooks.
func (f *FileBundle) NeedLeaderElection() bool { return false }

// Start checks until ctx ends; errors are logged and retried.
func (f *FileBundle) Start(ctx context.Context) error {
	changed := make(chan struct{}, 1)
	if f.r.opts.Watcher != nil {
		for _, name := range f.r.opts.ConversionCRDs {
			go f.r.watch(ctx, &apiextensionsv1.CustomResourceDefinitionList{}, changed, byName(name))
		}
	}
	var injected []byte
	var at time.Time
	for {
		bundle, err := os.ReadFile(f.file)
		if err == nil && len(bundle) == 0 {
			err = fmt.Errorf("%s is empty", f.file)
		}
		switch {
		case err != nil:
			f.r.opts.Log.Error(err, "Reading the CA bundle of the conversion webhook failed; retrying")
		case !bytes.Equal(bundle, injected) || time.Since(at) >= f.r.opts.CheckInterval:
			// What fails of a CRD is logged (inject), and tried again at the next poll.
			if _, pending, err := f.r.inject(ctx, bundle); err != nil {
				f.r.opts.Log.Error(err, "Injecting the CA bundle of the conversion webhook failed; retrying")
			} else if !pending {
				injected, at = bundle, time.Now()
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
			injected = nil // look again, whatever the file holds
		case <-time.After(filePoll):
		}
	}
}
