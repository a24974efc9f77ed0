package v2beta1

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/conversion"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
)

// An MPIJob is stored at kubeflow.org/v1; v2beta1 converts to and from it without loss, both ways:
//
//   - v2beta1's fields v1 lacks (sshAuthMountPath, mpiImplementation, runLauncherAsWorker,
//     launcherCreationPolicy) are kiln's MPIJob annotations at v1, which kiln's v1 MPIJobs
//     honour too. A job written at v2beta1 is marked kiln.dev/api-version at v1.
//   - v1's fields v2beta1 lacks (the deprecated spec.cleanPodPolicy, spec.mainContainer) travel
//     in the annotation v1FieldsAnnotation of the v2beta1 object. Its presence says the job was
//     written at v1, unless it names the version the job was written at (a job written at
//     v2beta1 that a v1 client gave v1 fields since): converted back, the v1 object is the one
//     that was stored.
//   - An annotation whose value v2beta1's schema would refuse stays an annotation: reading a
//     stored job never fails.
//   - runPolicy.managedBy's name for kiln is kubeflow.org/mpi-operator at v2beta1,
//     kubeflow.org/training-operator at v1.

// v1FieldsAnnotation holds, on a v2beta1 MPIJob written at v1, the v1 fields v2beta1 lacks.
const v1FieldsAnnotation = "kiln.dev/kubeflow.org-v1-fields"

// v1Fields are the v1 MPIJob fields v2beta1 has no place for, and the version the job was
// written at when v1 fields were set on a job written at v2beta1.
type v1Fields struct {
	CleanPodPolicy *kubeflowv1.CleanPodPolicy `json:"cleanPodPolicy,omitempty"`
	MainContainer  string                     `json:"mainContainer,omitempty"`
	WrittenAt      string                     `json:"writtenAt,omitempty"`
}

var _ conversion.Convertible = &MPIJob{}

// ConvertTo converts this v2beta1 MPIJob to the stored v1 one.
func (src *MPIJob) ConvertTo(hub conversion.Hub) error {
	dst, ok := hub.(*kubeflowv1.MPIJob)
	if !ok {
		return fmt.Errorf("converting an MPIJob to %T: want a kubeflow.org/v1 MPIJob", hub)
	}
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	dst.Status = *src.Status.DeepCopy()
	s := src.Spec.DeepCopy()
	dst.Spec = kubeflowv1.MPIJobSpec{
		SlotsPerWorker:  s.SlotsPerWorker,
		MPIReplicaSpecs: s.MPIReplicaSpecs,
		RunPolicy:       kubeflowv1.RunPolicy(s.RunPolicy), // the same fields
	}
	dst.Spec.RunPolicy.ManagedBy = renamed(s.RunPolicy.ManagedBy, MPIController, kubeflowv1.KubeflowJobsController)
	annotations := maps.Clone(dst.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	if raw, ok := annotations[v1FieldsAnnotation]; ok {
		var v1 v1Fields
		if err := json.Unmarshal([]byte(raw), &v1); err != nil {
			return fmt.Errorf("annotation %s of MPIJob %s holds no v1 fields (%v): remove it", v1FieldsAnnotation, src.Name, err)
		}
		dst.Spec.CleanPodPolicy, dst.Spec.MainContainer = v1.CleanPodPolicy, v1.MainContainer
		delete(annotations, v1FieldsAnnotation)
		if v1.WrittenAt != "" {
			annotations[kubeflowv1.AnnotationAPIVersion] = v1.WrittenAt
		}
	} else {
		annotations[kubeflowv1.AnnotationAPIVersion] = kubeflowv1.APIVersionV2beta1
	}
	set := func(key, value string) {
		if value != "" {
			annotations[key] = value
		}
	}
	set(kubeflowv1.AnnotationMPISSHAuthMountPath, s.SSHAuthMountPath)
	set(kubeflowv1.AnnotationMPIImplementation, string(s.MPIImplementation))
	set(kubeflowv1.AnnotationMPILauncherCreationPolicy, string(s.LauncherCreationPolicy))
	if s.RunLauncherAsWorker != nil {
		set(kubeflowv1.AnnotationMPIRunLauncherAsWorker, strconv.FormatBool(*s.RunLauncherAsWorker))
	}
	if len(annotations) == 0 {
		annotations = nil
	}
	dst.Annotations = annotations
	return nil
}

// ConvertFrom converts the stored v1 MPIJob to this v2beta1 one.
func (dst *MPIJob) ConvertFrom(hub conversion.Hub) error {
	src, ok := hub.(*kubeflowv1.MPIJob)
	if !ok {
		return fmt.Errorf("converting %T to a v2beta1 MPIJob: want a kubeflow.org/v1 MPIJob", hub)
	}
	dst.ObjectMeta = *src.ObjectMeta.DeepCopy()
	dst.Status = *src.Status.DeepCopy()
	s := src.Spec.DeepCopy()
	dst.Spec = MPIJobSpec{
		SlotsPerWorker:  s.SlotsPerWorker,
		MPIReplicaSpecs: s.MPIReplicaSpecs,
		RunPolicy:       RunPolicy(s.RunPolicy), // the same fields
	}
	dst.Spec.RunPolicy.ManagedBy = renamed(s.RunPolicy.ManagedBy, kubeflowv1.KubeflowJobsController, MPIController)
	annotations := maps.Clone(src.Annotations)
	// An annotation becomes a field only with a value the field's schema accepts; any other stays
	// an annotation (the webhook refuses it on a new job; reading never fails on a stored one).
	take := func(key string, accepted func(string) bool) string {
		v := annotations[key]
		if v == "" || !accepted(v) {
			return ""
		}
		delete(annotations, key)
		return v
	}
	dst.Spec.SSHAuthMountPath = take(kubeflowv1.AnnotationMPISSHAuthMountPath, func(v string) bool { return strings.HasPrefix(v, "/") })
	dst.Spec.MPIImplementation = MPIImplementation(take(kubeflowv1.AnnotationMPIImplementation, oneOf(
		kubeflowv1.MPIImplementationOpenMPI, kubeflowv1.MPIImplementationIntel, kubeflowv1.MPIImplementationMPICH)))
	dst.Spec.LauncherCreationPolicy = LauncherCreationPolicy(take(kubeflowv1.AnnotationMPILauncherCreationPolicy, oneOf(
		kubeflowv1.LauncherCreationAtStartup, kubeflowv1.LauncherCreationWaitForWorkersReady)))
	if v := take(kubeflowv1.AnnotationMPIRunLauncherAsWorker, oneOf("true", "false")); v != "" {
		b := v == "true"
		dst.Spec.RunLauncherAsWorker = &b
	}
	writtenAt := annotations[kubeflowv1.AnnotationAPIVersion]
	if writtenAt == GroupVersion.String() {
		delete(annotations, kubeflowv1.AnnotationAPIVersion)
	}
	if writtenAt != GroupVersion.String() || s.CleanPodPolicy != nil || s.MainContainer != "" {
		v1 := v1Fields{CleanPodPolicy: s.CleanPodPolicy, MainContainer: s.MainContainer}
		if writtenAt == GroupVersion.String() {
			v1.WrittenAt = writtenAt
		}
		raw, err := json.Marshal(v1)
		if err != nil {
			return err
		}
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[v1FieldsAnnotation] = string(raw)
	}
	if len(annotations) == 0 {
		annotations = nil
	}
	dst.Annotations = annotations
	return nil
}

// oneOf accepts the values given.
func oneOf(values ...string) func(string) bool {
	return func(v string) bool { return slices.Contains(values, v) }
}

// renamed is v, or to when v is from.
func renamed(v *string, from, to string) *string {
	if v != nil && *v == from {
		return &to
	}
	return v
}
