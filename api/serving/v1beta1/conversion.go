package v1beta1

import (
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/conversion"

	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
)

// An InferenceService is stored at v1beta1; v1alpha1 is the hub, the form the controllers
// compute on. v1beta1 groups the same fields, so each converts to the other without loss: a
// field moves, none is dropped or added (docs/decisions.md, 17). v1alpha1's modelUri, framework and storage are v1beta1's model;
// image, args, port, startupTimeoutSeconds and tokenAuth its server; minReplicas and
// maxReplicas its scaling; gpuPerReplica and gpuResource its gpus. An object is set exactly when
// one of its fields is.

var _ conversion.Convertible = &InferenceService{}

// ConvertTo converts this v1beta1 InferenceService to the v1alpha1 hub.
func (src *InferenceService) ConvertTo(hub conversion.Hub) error {
	dst, ok := hub.(*servingv1alpha1.InferenceService)
	if !ok {
		return fmt.Errorf("converting an InferenceService to %T: want a serving.kiln.dev/v1alpha1 InferenceService", hub)
	}
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	dst.Status = *src.Status.DeepCopy()
	s := src.Spec.DeepCopy()
	d := servingv1alpha1.InferenceServiceSpec{ModelURI: s.Model.URI, Framework: s.Model.Framework,
		Resources: s.Resources, Traffic: s.Traffic, Pod: s.Pod, NetworkPolicy: s.NetworkPolicy}
	if st := s.Model.Storage; st != nil {
		d.Storage = (*servingv1alpha1.ModelStorage)(st) // the same fields
	}
	if sv := s.Server; sv != nil {
		d.Image, d.Args, d.Port, d.StartupTimeoutSeconds, d.TokenAuth = sv.Image, sv.Args, sv.Port, sv.StartupTimeoutSeconds, sv.TokenAuth
	}
	if sc := s.Scaling; sc != nil {
		d.MinReplicas, d.MaxReplicas = sc.MinReplicas, sc.MaxReplicas
	}
	if g := s.GPUs; g != nil {
		d.GPUPerReplica, d.GPUResource = g.Count, g.Resource
	}
	dst.Spec = d
	return nil
}

// ConvertFrom converts the v1alpha1 hub InferenceService to this v1beta1 one.
func (dst *InferenceService) ConvertFrom(hub conversion.Hub) error {
	src, ok := hub.(*servingv1alpha1.InferenceService)
	if !ok {
		return fmt.Errorf("converting %T to a v1beta1 InferenceService: want a serving.kiln.dev/v1alpha1 InferenceService", hub)
	}
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	dst.Status = *src.Status.DeepCopy()
	s := src.Spec.DeepCopy()
	d := InferenceServiceSpec{Model: Model{URI: s.ModelURI, Framework: s.Framework},
		Resources: s.Resources, Traffic: s.Traffic, Pod: s.Pod, NetworkPolicy: s.NetworkPolicy}
	if st := s.Storage; st != nil {
		d.Model.Storage = (*ModelStorage)(st)
	}
	// Empty args are no field (JSON drops them): they alone would make an empty server.
	if s.Image != "" || len(s.Args) > 0 || s.Port != 0 || s.StartupTimeoutSeconds != nil || s.TokenAuth != "" {
		d.Server = &Server{Image: s.Image, Args: s.Args, Port: s.Port, StartupTimeoutSeconds: s.StartupTimeoutSeconds, TokenAuth: s.TokenAuth}
	}
	if s.MinReplicas != nil || s.MaxReplicas != nil {
		d.Scaling = &Scaling{MinReplicas: s.MinReplicas, MaxReplicas: s.MaxReplicas}
	}
	if s.GPUPerReplica != 0 || s.GPUResource != "" {
		d.GPUs = &GPUs{Count: s.GPUPerReplica, Resource: s.GPUResource}
	}
	dst.Spec = d
	return nil
}
