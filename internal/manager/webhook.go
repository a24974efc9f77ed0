package manager

import (
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmanager "sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/kiln-ml/kiln/internal/admission"
	"github.com/kiln-ml/kiln/internal/conversion"
	"github.com/kiln-ml/kiln/internal/servingcert"
)

// Injecting the CA bundle into kiln's own webhook configurations, by name. (The certificate's Secret is
// reached through a namespaced Role in config/rbac, not this ClusterRole.)
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,resourceNames=kiln-defaulting,verbs=get;list;watch;update
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,resourceNames=kiln-validation,verbs=get;list;watch;update
// And into the conversion webhook of the CRDs kiln converts (conversion.CRDs), by name: kiln may
// change no other CRD.
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,resourceNames=mpijobs.kubeflow.org;pyjobs.training.kiln.dev;inferenceservices.serving.kiln.dev,verbs=get;list;watch;update

// WebhookOptions configure the admission webhook server every replica runs.
type WebhookOptions struct {
	// Port of the webhook server; 0 serves no webhooks.
	Port int
	// AllowBorrowedRights turns off the check that refuses, to a requester who may not create
	// pods in the namespace, a job whose pods would get more than the requester's own rights (a
	// ServiceAccount, Secrets, the node): see internal/admission/rights.go. false (the check on)
	// by default.
	AllowBorrowedRights bool
	// Host is the address to bind; empty: all.
	Host string
	// CertDir, when set, holds tls.crt and tls.key written by someone else (cert-manager's Secret,
	// mounted); kiln reloads them when they change. Empty: kiln manages the certificate itself.
	CertDir string
	// Namespace and SecretName locate the self-managed certificate's Secret.
	Namespace, SecretName string
	// DNSNames and IPAddresses are the names the apiserver reaches the server by.
	DNSNames    []string
	IPAddresses []net.IP
	// CertValidity and CheckInterval tune the self-managed certificate (defaults: a year, 10 minutes).
	CertValidity, CheckInterval time.Duration
}

// webhookServer returns the server and what keeps its CA in the apiserver's hands: the rotator
// that also feeds it its certificate when kiln manages it, else what injects the CA of the
// mounted one into the CRDs kiln converts. c reads and writes the Secret, the webhook
// configurations and the CRDs.
func webhookServer(o WebhookOptions, c client.WithWatch, log logr.Logger, tlsOpts ...func(*tls.Config)) (webhook.Server, ctrlmanager.Runnable, error) {
	opts := webhook.Options{Port: o.Port, Host: o.Host, CertDir: o.CertDir, TLSOpts: tlsOpts}
	conversions := servingcert.Options{Namespace: o.Namespace, ConversionCRDs: conversion.CRDs, ConversionService: conversion.Service,
		CheckInterval: o.CheckInterval, Watcher: c, Log: log.WithName("servingcert")}
	if o.CertDir != "" {
		// Someone else keeps the certificate (cert-manager); its CA, mounted beside it, goes
		// into the CRDs kiln converts (a Helm chart cannot template CRDs, nor their annotations).
		return webhook.NewServer(opts), servingcert.NewFileBundle(c, c, filepath.Join(o.CertDir, "ca.crt"), conversions), nil
	}
	if o.Namespace == "" || o.SecretName == "" {
		return nil, nil, fmt.Errorf("the self-managed webhook certificate needs a namespace and a Secret name (--webhook-namespace, --webhook-secret), or use --webhook-cert-dir")
	}
	rotating := conversions
	rotating.SecretName, rotating.DNSNames, rotating.IPAddresses = o.SecretName, o.DNSNames, o.IPAddresses
	rotating.MutatingWebhooks, rotating.ValidatingWebhooks = []string{admission.MutatingName}, []string{admission.ValidatingName}
	rotating.CertValidity = o.CertValidity
	rot := servingcert.New(c, c, rotating)
	opts.TLSOpts = append(opts.TLSOpts, func(cfg *tls.Config) { cfg.GetCertificate = rot.GetCertificate })
	return webhook.NewServer(opts), rot, nil
}
