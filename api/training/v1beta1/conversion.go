package v1beta1

import (
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/conversion"

	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
)

// A PyJob is stored at v1beta1; v1alpha1 is the hub, the form the controllers compute on.
// v1beta1 groups the same fields, so each converts to the other without loss: a field moves,
// none is dropped or added (docs/decisions.md, 17). v1alpha1's flat datasetPath/dataset, outputPath/output, gpu/gpuResource
// and pod fields are v1beta1's dataset, output, gpus and pod objects; an object is set exactly
// when one of its fields is.

var _ conversion.Convertible = &PyJob{}

// ConvertTo converts this v1beta1 PyJob to the v1alpha1 hub.
func (src *PyJob) ConvertTo(hub conversion.Hub) error {
	dst, ok := hub.(*trainingv1alpha1.PyJob)
	if !ok {
		return fmt.Errorf("converting a PyJob to %T: want a training.kiln.dev/v1alpha1 PyJob", hub)
	}
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	dst.Status = *src.Status.DeepCopy()
	s := src.Spec.DeepCopy()
	d := trainingv1alpha1.PyJobSpec{
		Image: s.Image, Command: s.Command, Script: s.Script, Args: s.Args, Env: s.Env, Workers: s.Workers,
		ShmSize: s.ShmSize, BackoffLimit: s.BackoffLimit, ActiveDeadlineSeconds: s.ActiveDeadlineSeconds,
		TTLSecondsAfterFinished: s.TTLSecondsAfterFinished, Suspend: s.Suspend,
	}
	if g := s.GPUs; g != nil {
		d.GPU, d.GPUResource = g.Count, g.Resource
	}
	if s.Resources != nil {
		d.Resources = trainingv1alpha1.Resources(*s.Resources)
	}
	if ds := s.Dataset; ds != nil {
		d.DatasetPath = ds.Path
		if ds.ClaimName != "" || ds.SubPath != "" || ds.ReadOnly != nil {
			d.Dataset = &trainingv1alpha1.DatasetStorage{ClaimName: ds.ClaimName, SubPath: ds.SubPath, ReadOnly: ds.ReadOnly}
		}
	}
	if o := s.Output; o != nil {
		d.OutputPath = o.Path
		if o.ClaimName != "" || o.Size != nil || o.StorageClassName != nil || o.AccessMode != "" || o.ReclaimPolicy != "" {
			d.Output = &trainingv1alpha1.OutputStorage{ClaimName: o.ClaimName, Size: o.Size, StorageClassName: o.StorageClassName,
				AccessMode: o.AccessMode, ReclaimPolicy: o.ReclaimPolicy}
		}
	}
	if p := s.Pod; p != nil {
		d.NodeSelector, d.Tolerations, d.Affinity = p.NodeSelector, p.Tolerations, p.Affinity
		d.PriorityClassName, d.ServiceAccountName, d.ImagePullSecrets = p.PriorityClassName, p.ServiceAccountName, p.ImagePullSecrets
		d.SecurityContext, d.ContainerSecurityContext = p.SecurityContext, p.ContainerSecurityContext
	}
	dst.Spec = d
	return nil
}

// ConvertFrom converts the v1alpha1 hub PyJob to this v1beta1 one.
func (dst *PyJob) ConvertFrom(hub conversion.Hub) error {
	src, ok := hub.(*trainingv1alpha1.PyJob)
	if !ok {
		return fmt.Errorf("converting %T to a v1beta1 PyJob: want a training.kiln.dev/v1alpha1 PyJob", hub)
	}
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	dst.Status = *src.Status.DeepCopy()
	s := src.Spec.DeepCopy()
	d := PyJobSpec{
		Image: s.Image, Command: s.Command, Script: s.Script, Args: s.Args, Env: s.Env, Workers: s.Workers,
		ShmSize: s.ShmSize, BackoffLimit: s.BackoffLimit, ActiveDeadlineSeconds: s.ActiveDeadlineSeconds,
		TTLSecondsAfterFinished: s.TTLSecondsAfterFinished, Suspend: s.Suspend,
	}
	if s.GPU != 0 || s.GPUResource != "" {
		d.GPUs = &GPUs{Count: s.GPU, Resource: s.GPUResource}
	}
	if r := Resources(s.Resources); r != (Resources{}) {
		d.Resources = &r
	}
	if s.DatasetPath != "" || s.Dataset != nil {
		d.Dataset = &Dataset{Path: s.DatasetPath}
		if ds := s.Dataset; ds != nil {
			d.Dataset.ClaimName, d.Dataset.SubPath, d.Dataset.ReadOnly = ds.ClaimName, ds.SubPath, ds.ReadOnly
		}
	}
	if s.OutputPath != "" || s.Output != nil {
		d.Output = &Output{Path: s.OutputPath}
		if o := s.Output; o != nil {
			d.Output.ClaimName, d.Output.Size, d.Output.StorageClassName = o.ClaimName, o.Size, o.StorageClassName
			d.Output.AccessMode, d.Output.ReclaimPolicy = o.AccessMode, o.ReclaimPolicy
		}
	}
	p := Pod{NodeSelector: s.NodeSelector, Tolerations: s.Tolerations, Affinity: s.Affinity,
		PriorityClassName: s.PriorityClassName, ServiceAccountName: s.ServiceAccountName, ImagePullSecrets: s.ImagePullSecrets,
		SecurityContext: s.SecurityContext, ContainerSecurityContext: s.ContainerSecurityContext}
	// Empty maps and lists are no fields (JSON drops them): an object of nothing but those would
	// be an empty pod, which the schema refuses.
	if len(p.NodeSelector) > 0 || len(p.Tolerations) > 0 || p.Affinity != nil || p.PriorityClassName != "" || p.ServiceAccountName != "" ||
		len(p.ImagePullSecrets) > 0 || p.SecurityContext != nil || p.ContainerSecurityContext != nil {
		d.Pod = &p
	}
	dst.Spec = d
	return nil
}
