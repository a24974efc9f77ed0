package manager

import (
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// webhookServer returns the server and, when kiln manages the certificate, the rotator that
// feeds it; c reads and writes the Secret and the webhook configurations.
func webhookServer(o WebhookOptions, c client.WithWatch, log logr.Logger, tlsOpts ...func(*tls.Config)) (webhook.Server, *servingcert.Rotator, error) {
	opts := webhook.Options{Port: o.Port, Host: o.Host, CertDir: o.CertDir, TLSOpts: tlsOpts}
	if o.CertDir != "" {
		return webhook.NewServer(opts), nil, nil
	}
	if o.Namespace == "" || o.SecretName == "" {
		return nil, nil, fmt.Errorf("the self-managed webhook certificate needs a namespace and a Secret name (--webhook-namespace, --webhook-secret), or use --webhook-cert-dir")
	}
	rot := servingcert.New(c, c, servingcert.Options{
		Namespace: o.Namespace, SecretName: o.SecretName,
		DNSNames: o.DNSNames, IPAddresses: o.IPAddresses,
		MutatingWebhooks:   []string{admission.MutatingName},
		ValidatingWebhooks: []string{admission.ValidatingName},
		ConversionCRDs:     conversion.CRDs, ConversionService: conversion.Service,
		CertValidity: o.CertValidity, CheckInterval: o.CheckInterval, Watcher: c,
		Log: log.WithName("servingcert"),
	})
	opts.TLSOpts = append(opts.TLSOpts, func(cfg *tls.Config) { cfg.GetCertificate = rot.GetCertificate })
	return webhook.NewServer(opts), rot, nil
}
