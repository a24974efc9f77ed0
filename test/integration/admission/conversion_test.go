package admission

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	kubeflowv2beta1 "github.com/kiln-ml/kiln/api/kubeflow.org/v2beta1"
	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
	servingv1beta1 "github.com/kiln-ml/kiln/api/serving/v1beta1"
	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
	trainingv1beta1 "github.com/kiln-ml/kiln/api/training/v1beta1"
	"github.com/kiln-ml/kiln/internal/conversion"
	"github.com/kiln-ml/kiln/internal/servingcert"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

// TestMPIJobAtBothVersions: the apiserver serves the MPIJob CRD at v1 (stored) and v2beta1
// through kiln's conversion webhook. A job written at v2beta1 reads back at v2beta1 as written,
// and at v1 with its v2beta1 fields as kiln's annotations; a job written at v1, updated through
// v2beta1, is at v1 what it was.
func TestMPIJobAtBothVersions(t *testing.T) {
	ready(t)
	ctx := context.Background()
	ns := env.Namespace(t)

	written := builder.MPIJobV2beta1("pi", ns, 2)
	written.Spec.SSHAuthMountPath = "/home/mpiuser/.ssh"
	written.Spec.MPIImplementation = kubeflowv2beta1.MPIImplementationIntel
	written.Spec.RunLauncherAsWorker = ptr.To(true)
	written.Spec.RunPolicy.ManagedBy = ptr.To(kubeflowv2beta1.MPIController)
	written.Spec.RunPolicy.CleanPodPolicy = ptr.To(kubeflowv1.CleanPodPolicyNone)
	if err := env.Client.Create(ctx, written.DeepCopy()); err != nil {
		t.Fatalf("creating a v2beta1 MPIJob: %v", err)
	}
	var at2 kubeflowv2beta1.MPIJob
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(written), &at2); err != nil {
		t.Fatal(err)
	}
	// What the apiserver and kiln's defaulting add: defaults of the replica specs and pods, and
	// runPolicy.suspend false. The replica specs keep what was written.
	got, want := at2.Spec, written.Spec
	for rtype, w := range want.MPIReplicaSpecs {
		g := got.MPIReplicaSpecs[rtype]
		if g == nil || *g.Replicas != *w.Replicas || g.Template.Spec.Containers[0].Image != w.Template.Spec.Containers[0].Image {
			t.Errorf("read back at v2beta1, %s is %+v, want %d replicas of %s", rtype, g, *w.Replicas, w.Template.Spec.Containers[0].Image)
		}
	}
	want.MPIReplicaSpecs, want.RunPolicy.Suspend = got.MPIReplicaSpecs, ptr.To(false)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("read back at v2beta1 (-written +read):\n%s", d)
	}
	if at2.Annotations != nil {
		t.Errorf("read back at v2beta1 with annotations %v, want none", at2.Annotations)
	}
	var at1 kubeflowv1.MPIJob
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(written), &at1); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		kubeflowv1.AnnotationAPIVersion: "kubeflow.org/v2beta1", kubeflowv1.AnnotationMPISSHAuthMountPath: "/home/mpiuser/.ssh",
		kubeflowv1.AnnotationMPIImplementation: "Intel", kubeflowv1.AnnotationMPIRunLauncherAsWorker: "true",
	} {
		if at1.Annotations[k] != v {
			t.Errorf("at v1, annotation %s = %q, want %q", k, at1.Annotations[k], v)
		}
	}
	if m := at1.Spec.RunPolicy.ManagedBy; m == nil || *m != kubeflowv1.KubeflowJobsController {
		t.Errorf("at v1, managedBy %v, want %s", m, kubeflowv1.KubeflowJobsController)
	}

	// Written at v1 with the fields v2beta1 lacks, then updated through v2beta1.
	v1 := builder.MPIJob("legacy", ns).Replicas("Launcher", 1).Replicas("Worker", 1).
		Template("Worker", func(p *corev1.PodTemplateSpec) { p.Spec.Containers[0].Name = "main" }).Obj().(*kubeflowv1.MPIJob)
	v1.Spec.MainContainer = "main"
	v1.Spec.CleanPodPolicy = ptr.To(kubeflowv1.CleanPodPolicyAll)
	if err := env.Client.Create(ctx, v1); err != nil {
		t.Fatal(err)
	}
	var before kubeflowv1.MPIJob
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(v1), &before); err != nil {
		t.Fatal(err)
	}
	// kiln writes the job's status meanwhile: an update of an older read is retried.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var as2 kubeflowv2beta1.MPIJob
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(v1), &as2); err != nil {
			return err
		}
		as2.Labels = map[string]string{"team": "hpc"}
		return env.Client.Update(ctx, &as2)
	}); err != nil {
		t.Fatalf("updating a v1 MPIJob through v2beta1: %v", err)
	}
	var after kubeflowv1.MPIJob
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(v1), &after); err != nil {
		t.Fatal(err)
	}
	if after.Labels["team"] != "hpc" {
		t.Errorf("the label set through v2beta1 is not at v1: %v", after.Labels)
	}
	if !apiequality.Semantic.DeepEqual(before.Spec, after.Spec) || !apiequality.Semantic.DeepEqual(before.Annotations, after.Annotations) {
		t.Errorf("a v1 MPIJob updated through v2beta1 changed (-before +after):\n%s%s",
			cmp.Diff(before.Spec, after.Spec), cmp.Diff(before.Annotations, after.Annotations))
	}
}

// TestV2beta1MPIJobIsValidated: kiln's webhooks check a v2beta1 MPIJob as its v1 self, and the
// refusal names the field.
func TestV2beta1MPIJobIsValidated(t *testing.T) {
	ready(t)
	ns := env.Namespace(t)
	job := builder.MPIJobV2beta1("two", ns, 1)
	job.Spec.MPIReplicaSpecs["Launcher"].Replicas = ptr.To[int32](2)
	err := env.Client.Create(context.Background(), job)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "mpiReplicaSpecs[Launcher].replicas") {
		t.Fatalf("a v2beta1 MPIJob of two launchers: %v, want Invalid naming mpiReplicaSpecs[Launcher].replicas", err)
	}
}

// TestConversionIsPointedAtKilnsNamespace: a CRD kiln converts ships calling the webhook Service
// in kiln-system (a Helm chart cannot template its CRDs); kiln installed in another namespace
// points it at its own Service there, with its CA.
func TestConversionIsPointedAtKilnsNamespace(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	crd := convertedCRD(t, "widget")
	// Its first write of the CRD loses a race (the apiserver writes a CRD's status as it
	// establishes it): kiln writes again on what won.
	raced := &firstCRDUpdate{Writer: env.Client, before: func(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
		return env.Client.Patch(ctx, crd.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"raced":"yes"}}}`)))
	}}
	rot := servingcert.New(env.Client, raced, servingcert.Options{Namespace: ns, SecretName: "kiln-webhook-cert",
		DNSNames: []string{conversion.Service + "." + ns + ".svc"}, ConversionCRDs: []string{crd.Name}, ConversionService: conversion.Service})
	if err := rot.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	var got apiextensionsv1.CustomResourceDefinition
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(crd), &got); err != nil {
		t.Fatal(err)
	}
	if !raced.done.Load() || got.Labels["raced"] != "yes" {
		t.Errorf("the rotator's write of the CRD did not lose a race (labels %v): the test tests nothing", got.Labels)
	}
	cc := got.Spec.Conversion.Webhook.ClientConfig
	var secret corev1.Secret
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kiln-webhook-cert"}, &secret); err != nil {
		t.Fatal(err)
	}
	if cc.Service.Namespace != ns || cc.Service.Name != conversion.Service || string(cc.CABundle) != string(secret.Data["ca.crt"]) {
		t.Errorf("the conversion calls Service %s/%s trusting %d bytes: want %s/%s and the CA of %s", cc.Service.Namespace, cc.Service.Name,
			len(cc.CABundle), ns, conversion.Service, secret.Name)
	}

	// With a certificate someone else keeps (cert-manager's, mounted with its ca.crt), kiln puts
	// that CA into the CRD, and points it at its namespace the same way.
	// (The apiserver writes the CRD's status meanwhile: its conditions.)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(crd), &got); err != nil {
			return err
		}
		got.Spec.Conversion.Webhook.ClientConfig.Service.Namespace, got.Spec.Conversion.Webhook.ClientConfig.CABundle = "kiln-system", nil
		return env.Client.Update(ctx, &got)
	}); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, secret.Data["ca.crt"], 0o600); err != nil {
		t.Fatal(err)
	}
	// Its first write of the CRD fails: it writes again at its next poll.
	busy := &firstCRDUpdate{Writer: env.Client, before: busyAPIServer}
	keeper := servingcert.NewFileBundle(env.Client, busy, caFile, servingcert.Options{Namespace: ns,
		ConversionCRDs: []string{crd.Name}, ConversionService: conversion.Service})
	stop, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = keeper.Start(stop) }()
	trusts := func(bundle []byte) {
		t.Helper()
		testenv.Eventually(t, func() error {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(crd), &got); err != nil {
				return err
			}
			if cc := got.Spec.Conversion.Webhook.ClientConfig; cc.Service.Namespace != ns || string(cc.CABundle) != string(bundle) {
				return fmt.Errorf("the conversion calls Service %s/%s trusting %d bytes", cc.Service.Namespace, cc.Service.Name, len(cc.CABundle))
			}
			return nil
		})
	}
	trusts(secret.Data["ca.crt"])
	if !busy.done.Load() {
		t.Error("the keeper's write of the CRD did not fail: the test tests nothing")
	}
	// cert-manager renews the certificate (a self-signed one is its own CA): the new CA follows.
	renewed := append(append([]byte{}, secret.Data["ca.crt"]...), secret.Data["ca.crt"]...)
	if err := os.WriteFile(caFile, renewed, 0o600); err != nil {
		t.Fatal(err)
	}
	trusts(renewed)
}

// TestAFailedCRDIsTriedAgainSoon: a CRD that did not take the rotator's CA bundle (the apiserver
// failed the write) is written again within seconds, not at the next check minutes later.
func TestAFailedCRDIsTriedAgainSoon(t *testing.T) {
	ns := env.Namespace(t)
	crd := convertedCRD(t, "gadget")
	busy := &firstCRDUpdate{Writer: env.Client, before: busyAPIServer}
	rot := servingcert.New(env.Client, busy, servingcert.Options{Namespace: ns, SecretName: "kiln-webhook-cert",
		DNSNames: []string{conversion.Service + "." + ns + ".svc"}, ConversionCRDs: []string{crd.Name}, ConversionService: conversion.Service})
	stop, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = rot.Start(stop) }()
	testenv.Eventually(t, func() error {
		var got apiextensionsv1.CustomResourceDefinition
		if err := env.Client.Get(stop, client.ObjectKeyFromObject(crd), &got); err != nil {
			return err
		}
		if cc := got.Spec.Conversion.Webhook.ClientConfig; cc.Service.Namespace != ns || len(cc.CABundle) == 0 {
			return fmt.Errorf("the conversion calls Service %s/%s trusting %d bytes", cc.Service.Namespace, cc.Service.Name, len(cc.CABundle))
		}
		return nil
	})
	if !busy.done.Load() {
		t.Error("the rotator's write of the CRD did not fail: the test tests nothing")
	}
}

// convertedCRD creates the CRD of kind (lower case) in group conversion.kiln.dev, its conversion
// calling kiln's webhook Service in kiln-system, as kiln's CRDs ship; it goes with the test.
func convertedCRD(t *testing.T, kind string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: kind + "s.conversion.kiln.dev"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "conversion.kiln.dev", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: kind + "s", Singular: kind,
				Kind: strings.ToUpper(kind[:1]) + kind[1:], ListKind: strings.ToUpper(kind[:1]) + kind[1:] + "List"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}}},
		},
	}
	conversion.Point(crd, apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{
		Namespace: "kiln-system", Name: conversion.Service, Path: ptr.To(conversion.Path), Port: ptr.To[int32](443)}})
	if err := env.Client.Create(context.Background(), crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), crd) })
	return crd
}

// busyAPIServer fails a write as an apiserver too busy to take it does.
func busyAPIServer(context.Context, *apiextensionsv1.CustomResourceDefinition) error {
	return apierrors.NewServiceUnavailable("the test's apiserver is busy")
}

// firstCRDUpdate calls before ahead of the first Update of a CRD (another write lands first, or
// the apiserver fails it: before's error is the Update's).
type firstCRDUpdate struct {
	client.Writer
	before func(context.Context, *apiextensionsv1.CustomResourceDefinition) error
	done   atomic.Bool
}

func (w *firstCRDUpdate) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok && w.done.CompareAndSwap(false, true) {
		if err := w.before(ctx, crd); err != nil {
			return err
		}
	}
	return w.Writer.Update(ctx, obj, opts...)
}

// TestPyJobAtBothVersions: a PyJob written at v1beta1 (the stored version) is at v1alpha1 the
// same run in its flat fields, and reads back at v1beta1 as written: v1beta1 has no schema
// defaults of dataset.readOnly and output.reclaimPolicy (unset is true and Retain), which would
// break its rules where there is no claim. kiln's webhooks check it as its v1alpha1 self.
func TestPyJobAtBothVersions(t *testing.T) {
	ready(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	written := &trainingv1beta1.PyJob{
		ObjectMeta: metav1.ObjectMeta{Name: "resnet", Namespace: ns},
		Spec: trainingv1beta1.PyJobSpec{
			Image: "pytorch/pytorch:2.0", Command: []string{"python", "train.py"}, Workers: 2,
			GPUs:    &trainingv1beta1.GPUs{Count: 2, Resource: "amd.com/gpu"},
			Dataset: &trainingv1beta1.Dataset{Path: "/mnt/data", ClaimName: "imagenet", SubPath: "train"},
			Output:  &trainingv1beta1.Output{Path: "/mnt/out", Size: ptr.To(resource.MustParse("10Gi"))},
			Pod:     &trainingv1beta1.Pod{NodeSelector: map[string]string{"pool": "gpu"}, PriorityClassName: "batch"},
		},
	}
	if err := env.Client.Create(ctx, written.DeepCopy()); err != nil {
		t.Fatalf("creating a v1beta1 PyJob: %v", err)
	}
	var at1 trainingv1alpha1.PyJob
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(written), &at1); err != nil {
		t.Fatal(err)
	}
	s := at1.Spec
	if s.GPU != 2 || s.GPUResource != "amd.com/gpu" || s.DatasetPath != "/mnt/data" || s.Dataset == nil || s.Dataset.ClaimName != "imagenet" ||
		s.Dataset.SubPath != "train" || s.OutputPath != "/mnt/out" || s.Output == nil || s.Output.Size.String() != "10Gi" ||
		s.NodeSelector["pool"] != "gpu" || s.PriorityClassName != "batch" || s.Workers != 2 {
		t.Errorf("at v1alpha1: %+v", s)
	}
	var at2 trainingv1beta1.PyJob
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(written), &at2); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(written.Spec, at2.Spec); d != "" {
		t.Errorf("read back at v1beta1 (-written +read):\n%s", d)
	}

	// The manifest applied again as it was (kubectl replace), only suspend changed: defaults do not
	// count as changing an immutable field. kiln writes the status meanwhile: retried on conflict.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var now trainingv1beta1.PyJob
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(written), &now); err != nil {
			return err
		}
		replaced := written.DeepCopy()
		replaced.ResourceVersion, replaced.Spec.Suspend = now.ResourceVersion, ptr.To(true)
		return env.Client.Update(ctx, replaced)
	}); err != nil {
		t.Errorf("replacing a v1beta1 PyJob with its own manifest, suspended: %v", err)
	}

	bad := written.DeepCopy()
	bad.Name, bad.Spec.Dataset.Path = "same", "/mnt/out"
	if err := env.Client.Create(ctx, bad); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.output.path must differ from spec.dataset.path") {
		t.Errorf("a v1beta1 PyJob reading and writing one path: %v, want Invalid naming spec.output.path", err)
	}
}

// TestInferenceServiceAtBothVersions: an InferenceService written at v1beta1 is at v1alpha1 the
// same endpoint in its flat fields, reads back at v1beta1 as written, and scales at v1beta1
// through its scaling.minReplicas.
func TestInferenceServiceAtBothVersions(t *testing.T) {
	ready(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	written := &servingv1beta1.InferenceService{
		ObjectMeta: metav1.ObjectMeta{Name: "iris", Namespace: ns},
		Spec: servingv1beta1.InferenceServiceSpec{
			Model:   servingv1beta1.Model{URI: "s3://models/iris", Framework: servingv1alpha1.FrameworkSKLearn, Storage: &servingv1beta1.ModelStorage{SecretName: "s3"}},
			Server:  &servingv1beta1.Server{Args: []string{"--workers=2"}, Port: 9000},
			Scaling: &servingv1beta1.Scaling{MinReplicas: ptr.To[int32](2), MaxReplicas: ptr.To[int32](4)},
			GPUs:    &servingv1beta1.GPUs{Count: 1, Resource: "nvidia.com/gpu"},
		},
	}
	if err := env.Client.Create(ctx, written.DeepCopy()); err != nil {
		t.Fatalf("creating a v1beta1 InferenceService: %v", err)
	}
	var at1 servingv1alpha1.InferenceService
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(written), &at1); err != nil {
		t.Fatal(err)
	}
	s := at1.Spec
	if s.ModelURI != "s3://models/iris" || s.Framework != "sklearn" || s.Storage == nil || s.Storage.SecretName != "s3" || s.Port != 9000 ||
		len(s.Args) != 1 || *s.MinReplicas != 2 || *s.MaxReplicas != 4 || s.GPUPerReplica != 1 {
		t.Errorf("at v1alpha1: %+v", s)
	}
	var at2 servingv1beta1.InferenceService
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(written), &at2); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(written.Spec, at2.Spec); d != "" {
		t.Errorf("read back at v1beta1 (-written +read):\n%s", d)
	}
	scale := &autoscalingv1.Scale{}
	if err := env.Client.SubResource("scale").Get(ctx, &at2, scale); err != nil {
		t.Fatalf("reading the scale of a v1beta1 InferenceService: %v", err)
	}
	if scale.Spec.Replicas != 2 {
		t.Errorf("scale at v1beta1: %d replicas, want scaling.minReplicas 2", scale.Spec.Replicas)
	}
}
