// Package conversion serves the conversion webhook of kiln's CRDs that serve more than one
// version (MPIJob: kubeflow.org/v1, stored, and v2beta1; PyJob and InferenceService: v1alpha1
// and v1beta1, stored; docs/decisions.md, 17), and points those CRDs at it: the same list feeds
// the webhook server, the generated CRDs and the local clusters, so they cannot drift.
package conversion

import (
	"context"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconversion "sigs.k8s.io/controller-runtime/pkg/conversion"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"
)

// Path is where the webhook server answers ConversionReviews.
const Path = "/convert"

// Service is the name of kiln's webhook Service, in kiln's namespace.
const Service = "kiln-webhook"

// CRDs are the CustomResourceDefinitions converted by kiln's webhook.
var CRDs = []string{"mpijobs.kubeflow.org", "pyjobs.training.kiln.dev", "inferenceservices.serving.kiln.dev"}

// Register adds the conversion handler to the webhook server: it converts between the versions
// of every kind of scheme through the kind's hub.
func Register(server webhook.Server, scheme *runtime.Scheme) {
	server.Register(Path, conversion.NewWebhookHandler(scheme, conversion.NewRegistry()))
}

// Stored is the object of a kind stored at a version other than its hub's.
type Stored interface {
	client.Object
	ctrlconversion.Convertible
}

// ReadHub reads the object of key at the version it is stored (into stored) and converts it to
// hub, the form a controller computes on. The controller's cache holds the stored version: once
// every object is stored at it, no read waits for the webhook.
func ReadHub(ctx context.Context, c client.Reader, key client.ObjectKey, stored Stored, hub ctrlconversion.Hub) error {
	if err := c.Get(ctx, key, stored); err != nil {
		return err
	}
	return stored.ConvertTo(hub)
}

// Converts says whether kiln's webhook converts the CRD of that name.
func Converts(name string) bool { return slices.Contains(CRDs, name) }

// Point sets the CRD's conversion to kiln's webhook, reached by clientConfig; a caBundle it
// already holds is kept (kiln injects it at run time).
func Point(crd *apiextensionsv1.CustomResourceDefinition, clientConfig apiextensionsv1.WebhookClientConfig) {
	if old := crd.Spec.Conversion; old != nil && old.Webhook != nil && old.Webhook.ClientConfig != nil && len(clientConfig.CABundle) == 0 {
		clientConfig.CABundle = old.Webhook.ClientConfig.CABundle
	}
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig:             &clientConfig,
			ConversionReviewVersions: []string{"v1"},
		},
	}
}
