package v2beta1

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/test/fuzzer"
)

// kilnAnnotations are the annotations the conversion reads: a fuzzed object holds them only as
// the other version would write them.
var kilnAnnotations = []string{
	kubeflowv1.AnnotationMPISSHAuthMountPath, kubeflowv1.AnnotationMPIImplementation,
	kubeflowv1.AnnotationMPILauncherCreationPolicy, kubeflowv1.AnnotationMPIRunLauncherAsWorker,
	kubeflowv1.AnnotationAPIVersion, v1FieldsAnnotation,
}

func filler(t *testing.T, seed int64) *randfill.Filler {
	return fuzzer.Filler(t, seed, kubeflowv1.AddToScheme, AddToScheme)
}

// managedBy is a value the version's schema accepts.
func managedBy(f *randfill.Filler, values ...string) *string {
	var i int
	f.Fill(&i)
	if i%3 == 0 {
		return nil
	}
	v := values[(i&0xff)%len(values)]
	return &v
}

// TestV2beta1RoundTrip: a v2beta1 MPIJob converted to the stored v1 and back is the same, for
// every field (apimachinery's fuzzer fills them all).
func TestV2beta1RoundTrip(t *testing.T) {
	f := filler(t, 1)
	fuzzer.SpokeRoundTrip[MPIJob, kubeflowv1.MPIJob](t, f, 300, func(in *MPIJob) {
		for _, k := range kilnAnnotations {
			delete(in.Annotations, k)
		}
		in.Spec.RunPolicy.ManagedBy = managedBy(f, MPIController, kubeflowv1.MultiKueueController)
		// What the schema accepts: an absolute path, the enums' values.
		if p := in.Spec.SSHAuthMountPath; p != "" {
			in.Spec.SSHAuthMountPath = "/" + p
		}
		in.Spec.MPIImplementation = []MPIImplementation{"", MPIImplementationOpenMPI, MPIImplementationIntel, MPIImplementationMPICH}[len(in.Spec.MPIImplementation)%4]
		in.Spec.LauncherCreationPolicy = []LauncherCreationPolicy{"", LauncherCreationPolicyAtStartup, LauncherCreationPolicyWaitForWorkersReady}[len(in.Spec.LauncherCreationPolicy)%3]
	})
}

// TestV1RoundTrip: a stored v1 MPIJob read at v2beta1 and written back is the same, kiln's MPI
// annotations included.
func TestV1RoundTrip(t *testing.T) {
	f := filler(t, 2)
	i := 0
	fuzzer.HubRoundTrip[kubeflowv1.MPIJob, MPIJob](t, f, 300, func(in *kubeflowv1.MPIJob) {
		i++
		for _, k := range kilnAnnotations {
			delete(in.Annotations, k)
		}
		if i%2 == 0 {
			if in.Annotations == nil {
				in.Annotations = map[string]string{}
			}
			in.Annotations[kubeflowv1.AnnotationMPIImplementation] = kubeflowv1.MPIImplementationIntel
			in.Annotations[kubeflowv1.AnnotationMPIRunLauncherAsWorker] = []string{"true", "false"}[i%4/2]
			in.Annotations[kubeflowv1.AnnotationMPISSHAuthMountPath] = "/home/mpiuser/.ssh"
			in.Annotations[kubeflowv1.AnnotationMPILauncherCreationPolicy] = kubeflowv1.LauncherCreationWaitForWorkersReady
		}
		if i%3 == 0 {
			// Written at v2beta1; a v1 client may have set v1 fields since.
			in.Annotations = map[string]string{kubeflowv1.AnnotationAPIVersion: GroupVersion.String()}
		}
		if i%5 == 0 {
			// Values the v2beta1 fields' schema refuses (stored before kiln checked them).
			in.Annotations = map[string]string{kubeflowv1.AnnotationMPIRunLauncherAsWorker: "1",
				kubeflowv1.AnnotationMPIImplementation: "MVAPICH", kubeflowv1.AnnotationMPISSHAuthMountPath: ".ssh",
				kubeflowv1.AnnotationMPILauncherCreationPolicy: "Later"}
		}
		in.Spec.RunPolicy.ManagedBy = managedBy(f, kubeflowv1.KubeflowJobsController, kubeflowv1.MultiKueueController)
	})
}

// TestWrittenAtV2beta1: a v2beta1 MPIJob is stored with its v2beta1 fields as kiln's MPI
// annotations and marked as written at v2beta1; read back it carries none of them.
func TestWrittenAtV2beta1(t *testing.T) {
	yes := true
	in := MPIJob{Spec: MPIJobSpec{SSHAuthMountPath: "/home/mpiuser/.ssh", MPIImplementation: MPIImplementationMPICH,
		RunLauncherAsWorker: &yes, LauncherCreationPolicy: LauncherCreationPolicyWaitForWorkersReady,
		RunPolicy: RunPolicy{ManagedBy: ptr.To(MPIController)}}}
	in.Name = "pi"
	var hub kubeflowv1.MPIJob
	if err := in.ConvertTo(&hub); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		kubeflowv1.AnnotationAPIVersion:                "kubeflow.org/v2beta1",
		kubeflowv1.AnnotationMPISSHAuthMountPath:       "/home/mpiuser/.ssh",
		kubeflowv1.AnnotationMPIImplementation:         "MPICH",
		kubeflowv1.AnnotationMPIRunLauncherAsWorker:    "true",
		kubeflowv1.AnnotationMPILauncherCreationPolicy: "WaitForWorkersReady",
	}
	if d := cmp.Diff(want, hub.Annotations); d != "" {
		t.Errorf("stored annotations (-want +got):\n%s", d)
	}
	if got := *hub.Spec.RunPolicy.ManagedBy; got != kubeflowv1.KubeflowJobsController {
		t.Errorf("stored managedBy %q, want %q", got, kubeflowv1.KubeflowJobsController)
	}
	var out MPIJob
	if err := out.ConvertFrom(&hub); err != nil {
		t.Fatal(err)
	}
	if out.Annotations != nil {
		t.Errorf("read back at v2beta1 with annotations %v, want none", out.Annotations)
	}
	bad := hub.DeepCopy()
	bad.Annotations[kubeflowv1.AnnotationMPIRunLauncherAsWorker] = "sometimes"
	if err := out.ConvertFrom(bad); err != nil || out.Spec.RunLauncherAsWorker != nil ||
		out.Annotations[kubeflowv1.AnnotationMPIRunLauncherAsWorker] != "sometimes" {
		t.Errorf("a runLauncherAsWorker annotation v2beta1 cannot hold: %v, %v, annotations %v; want it kept as an annotation",
			err, out.Spec.RunLauncherAsWorker, out.Annotations)
	}
}
