package admission

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kiln-ml/kiln/internal/servingcert"
	"github.com/kiln-ml/kiln/test/testenv"
)

// A CA rotation with requests in flight: the apiserver calls a webhook, served with a rotator's
// certificate, in loops while the rotator's CA reaches the last third of its life and is renewed.
// No call fails, and the certificate served is always of a CA the configuration already carries.
// The rotator's clock is a fake one, started 5 minutes ago with 12-minute certificates (a CA of
// 120), so that the CA is due 62.5 minutes on while every certificate made is valid now (they are
// backdated by an hour): the apiserver checks them at the real time.
func TestAdmissionNeverFailsAcrossACARotation(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	start := time.Now().Add(-5 * time.Minute)
	clk := clocktesting.NewFakeClock(start)
	name := "rotation-" + ns
	rot := servingcert.New(env.Client, env.Client, servingcert.Options{Namespace: ns, SecretName: "rotating-cert",
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ValidatingWebhooks: []string{name}, CertValidity: 12 * time.Minute, Clock: clk})
	var calls atomic.Int64
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		review := &admissionv1.AdmissionReview{}
		if err := json.NewDecoder(r.Body).Decode(review); err != nil || review.Request == nil {
			http.Error(w, "no AdmissionReview", http.StatusBadRequest)
			return
		}
		calls.Add(1)
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(review)
	})
	// Served with the rotator's certificate alone (httptest's server would answer a client that
	// sends no server name, as for an IP address, with its own).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{GetCertificate: rot.GetCertificate, MinVersion: tls.VersionTLS12}}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	defer srv.Close()
	config := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "allow.rotation.kiln.dev",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://" + addr + "/validate")},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"}, FailurePolicy: ptr.To(admissionregistrationv1.Fail), TimeoutSeconds: ptr.To[int32](10)}}}
	if err := env.Client.Create(ctx, config); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(ctx, config) })
	if err := rot.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	create := func(name string) error {
		return env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}, client.DryRunAll)
	}
	testenv.Eventually(t, func() error {
		if err := create("first"); err != nil {
			return err
		}
		if calls.Load() == 0 {
			return fmt.Errorf("the webhook was not called")
		}
		return nil
	})
	secret := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rotating-cert"}, secret); err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(secret.Data["ca.crt"])
	if block == nil {
		t.Fatal("no CA in the Secret")
	}
	first, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}

	served := func() (*x509.Certificate, error) { return servedLeaf(addr) }
	stop := admitInLoops(func(w, i int) error { return create(fmt.Sprintf("loop-%d-%d", w, i)) }, served, func() ([]byte, error) {
		fresh := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(config), fresh); err != nil {
			return nil, err
		}
		return fresh.Webhooks[0].ClientConfig.CABundle, nil
	})
	time.Sleep(time.Second)
	clk.SetTime(start.Add(62*time.Minute + 30*time.Second)) // the CA is due
	rotated := false
	for range 60 {
		if err := rot.Ensure(ctx); err != nil {
			t.Fatal(err)
		}
		leaf, err := served()
		if err == nil && leaf.CheckSignatureFrom(first) != nil {
			rotated = true
			break
		}
		time.Sleep(500 * time.Millisecond)
		clk.Step(500 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // and a while after the switch
	if err := stop(); err != nil {
		t.Fatalf("admission failed across the CA rotation: %v", err)
	}
	if !rotated {
		t.Fatal("the served certificate is still of the first CA after 30 s")
	}
	t.Logf("%d requests across the CA rotation, none failed", calls.Load())
}
