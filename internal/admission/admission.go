// Package admission holds kiln's admission webhooks: defaulting and validation of every kind kiln
// serves, the handlers the webhook server runs, and the webhook configurations that point the
// apiserver at them (config/webhook is generated from the same list, so paths cannot drift).
package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// The names of kiln's webhook configurations.
const (
	MutatingName   = "kiln-defaulting"
	ValidatingName = "kiln-validation"
)

// hook is the admission of one kind.
type hook struct {
	gvk      schema.GroupVersionKind
	resource string // plural, lowercase
	new      func() client.Object
	// defaults mutates a new or updated object; nil when the CRD schema holds every default.
	defaults func(obj client.Object)
	// validate checks obj; old is nil on create.
	validate func(ctx context.Context, obj, old client.Object) (field.ErrorList, []string)
	// grants are what obj gives its pods beyond what any pod of the namespace has (rights.go).
	grants func(obj client.Object) []grant
}

func (h hook) path(verb string) string {
	return fmt.Sprintf("/%s-%s-%s-%s", verb, strings.ReplaceAll(h.gvk.Group, ".", "-"), h.gvk.Version, strings.ToLower(h.gvk.Kind))
}

func (h hook) webhookName(verb string) string {
	return fmt.Sprintf("%s.%s.kiln.dev", verb, strings.ToLower(h.gvk.Kind))
}

// Set is the admission of the kinds one manager serves.
type Set struct {
	hooks   []hook
	decoder admission.Decoder
	rights  PodRights
}

// Register adds the handlers of every hook to the webhook server.
func (s *Set) Register(server webhook.Server) {
	for _, h := range s.hooks {
		if h.defaults != nil {
			server.Register(h.path("mutate"), &webhook.Admission{Handler: defaulter{h, s.decoder}})
		}
		server.Register(h.path("validate"), &webhook.Admission{Handler: validator{h, s.decoder, s.rights}})
	}
}

// Configurations are the webhook configurations of the set; clientConfig says how the apiserver
// reaches the path (a Service in a cluster, a URL in tests and `kiln dev`).
func (s *Set) Configurations(clientConfig func(path string) admissionregistrationv1.WebhookClientConfig) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: MutatingName},
	}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: ValidatingName},
	}
	for _, h := range s.hooks {
		rules := []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule: admissionregistrationv1.Rule{
				APIGroups: []string{h.gvk.Group}, APIVersions: []string{h.gvk.Version},
				Resources: []string{h.resource}, Scope: ptr.To(admissionregistrationv1.NamespacedScope),
			},
		}}
		if h.defaults != nil {
			mutating.Webhooks = append(mutating.Webhooks, admissionregistrationv1.MutatingWebhook{
				Name: h.webhookName("default"), ClientConfig: clientConfig(h.path("mutate")), Rules: rules,
				FailurePolicy: ptr.To(admissionregistrationv1.Fail), SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone),
				AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](10),
			})
		}
		validating.Webhooks = append(validating.Webhooks, admissionregistrationv1.ValidatingWebhook{
			Name: h.webhookName("validate"), ClientConfig: clientConfig(h.path("validate")), Rules: rules,
			FailurePolicy: ptr.To(admissionregistrationv1.Fail), SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"}, TimeoutSeconds: ptr.To[int32](10),
		})
	}
	return mutating, validating
}

// defaulter answers a mutating review with the patch that applies the hook's defaults.
type defaulter struct {
	hook
	decoder admission.Decoder
}

func (d defaulter) Handle(_ context.Context, req admission.Request) admission.Response {
	obj := d.new()
	if err := d.decoder.DecodeRaw(req.Object, obj); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	d.defaults(obj)
	out, err := json.Marshal(obj)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, out)
}

// validator answers a validating review: denied with every field error as a 422 Invalid status,
// the way the apiserver reports its own validation, or allowed with the hook's warnings.
type validator struct {
	hook
	decoder admission.Decoder
	rights  PodRights
}

func (v validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	obj := v.new()
	if err := v.decoder.DecodeRaw(req.Object, obj); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	var old client.Object
	if req.Operation == admissionv1.Update {
		old = v.new()
		if err := v.decoder.DecodeRaw(req.OldObject, old); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
	}
	errs, warnings := v.validate(ctx, obj, old)
	if old != nil {
		// Ratchet: an update is not refused for what was already wrong before it (an object
		// stored before the webhook was installed must stay deletable and relabelable).
		was, _ := v.validate(ctx, old, nil)
		errs = newErrors(errs, was)
	}
	if v.grants != nil && v.rights != nil && len(errs) == 0 { // refused already: no review to ask
		var had []grant
		if old != nil {
			had = v.grants(old)
		}
		borrowed, err := refuseBorrowed(ctx, v.rights, req.UserInfo, req.Namespace, v.grants(obj), had)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		errs = append(errs, borrowed...)
	}
	if len(errs) == 0 {
		return admission.Allowed("").WithWarnings(warnings...)
	}
	st := apierrors.NewInvalid(v.gvk.GroupKind(), obj.GetName(), errs).Status()
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &st}}.WithWarnings(warnings...)
}

// newErrors are the errors of now that before did not have.
func newErrors(now, before field.ErrorList) field.ErrorList {
	seen := map[string]bool{}
	for _, e := range before {
		seen[e.Error()] = true
	}
	var out field.ErrorList
	for _, e := range now {
		if !seen[e.Error()] {
			out = append(out, e)
		}
	}
	return out
}

// newSet builds a set with a decoder for scheme.
func newSet(scheme *runtime.Scheme, hooks []hook, rights PodRights) *Set {
	return &Set{hooks: hooks, decoder: admission.NewDecoder(scheme), rights: rights}
}
