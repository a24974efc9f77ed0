package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	kubeflowv2beta1 "github.com/kiln-ml/kiln/api/kubeflow.org/v2beta1"
	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
	servingv1beta1 "github.com/kiln-ml/kiln/api/serving/v1beta1"
	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
	trainingv1beta1 "github.com/kiln-ml/kiln/api/training/v1beta1"
	"github.com/kiln-ml/kiln/internal/devcluster"
	"github.com/kiln-ml/kiln/test/testenv"
)

// servedVersions are, per kiln kind served at more than one version, its samples, its group and
// a new object of each version (the hub first).
type servedVersions struct {
	samples, group string
	versions       []func() runtime.Object
	// writtenDefaults are the fields (paths in the applied version, and their values) that a
	// write at another version may add: that version's schema defaults them, the applied one's
	// does not, and unset means that value.
	writtenDefaults map[string]any
}

// TestSamplesReadTheSameAtEveryVersion: each sample manifest of a kind served at several versions
// applies unchanged and reads back, at the version it is written at and at every other (converted
// back in memory), as what was applied (plus the schema's defaults).
func TestSamplesReadTheSameAtEveryVersion(t *testing.T) {
	ready(t)
	for _, kind := range versionedKinds {
		paths, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), kind.samples))
		if err != nil || len(paths) == 0 {
			t.Fatalf("no samples %s: %v", kind.samples, err)
		}
		for _, path := range paths {
			t.Run(filepath.Base(path), func(t *testing.T) {
				ctx := context.Background()
				ns := env.Namespace(t)
				objs, err := devcluster.ReadObjects(path)
				if err != nil {
					t.Fatal(err)
				}
				var applied *unstructured.Unstructured
				for _, o := range objs {
					o.SetNamespace(ns)
					if err := env.Client.Create(ctx, o.DeepCopy()); err != nil {
						t.Fatalf("applying %s %s of %s: %v", o.GetKind(), o.GetName(), path, err)
					}
					if o.GroupVersionKind().Group == kind.group {
						applied = o
					}
				}
				if applied == nil {
					t.Fatalf("%s holds no object of group %s", path, kind.group)
				}
				readBack := &unstructured.Unstructured{}
				readBack.SetGroupVersionKind(applied.GroupVersionKind())
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(applied), readBack); err != nil {
					t.Fatal(err)
				}
				if err := within(applied.Object["spec"], readBack.Object["spec"], "spec"); err != nil {
					t.Errorf("read at %s: %v", applied.GetAPIVersion(), err)
				}
				for _, version := range kind.versions {
					at := version()
					if at.GetObjectKind().GroupVersionKind().Version == applied.GroupVersionKind().Version {
						continue
					}
					if err := env.Client.Get(ctx, client.ObjectKeyFromObject(applied), at.(client.Object)); err != nil {
						t.Fatalf("reading at %T: %v", at, err)
					}
					written, err := env.Client.Scheme().New(applied.GroupVersionKind())
					if err != nil {
						t.Fatal(err)
					}
					if err := convert(at, written, kind.versions[0]().(conversion.Hub)); err != nil {
						t.Fatal(err)
					}
					back, err := runtime.DefaultUnstructuredConverter.ToUnstructured(written)
					if err != nil {
						t.Fatal(err)
					}
					if err := within(readBack.Object["spec"], back["spec"], "spec"); err != nil {
						t.Errorf("read at %T and converted back: %v", at, err)
					}
					if err := within(back["spec"], readBack.Object["spec"], "spec"); err != nil {
						t.Errorf("read at %T and converted back, it has more: %v", at, err)
					}
					// Written back unchanged at that version, it is accepted and stored as it was
					// (read again when kiln wrote its status meanwhile).
					err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
						if err := env.Client.Get(ctx, client.ObjectKeyFromObject(applied), at.(client.Object)); err != nil {
							return err
						}
						return env.Client.Update(ctx, at.(client.Object))
					})
					if err != nil {
						t.Fatalf("writing back at %T what was read at it: %v", at, err)
					}
					again := &unstructured.Unstructured{}
					again.SetGroupVersionKind(applied.GroupVersionKind())
					if err := env.Client.Get(ctx, client.ObjectKeyFromObject(applied), again); err != nil {
						t.Fatal(err)
					}
					if err := within(readBack.Object["spec"], again.Object["spec"], "spec"); err != nil {
						t.Errorf("written back at %T: %v", at, err)
					}
					for path, value := range kind.writtenDefaults {
						dropIfAdded(again.Object, readBack.Object, value, strings.Split(path, ".")...)
					}
					if err := within(again.Object["spec"], readBack.Object["spec"], "spec"); err != nil {
						t.Errorf("written back at %T, it has more: %v", at, err)
					}
					if !maps.Equal(readBack.GetAnnotations(), again.GetAnnotations()) {
						t.Errorf("written back at %T, annotations %v, were %v", at, again.GetAnnotations(), readBack.GetAnnotations())
					}
				}
			})
		}
	}
}

// within says whether every field of want is in got with the same value (got may have more:
// the schema's defaults).
func within(want, got any, path string) error {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok && len(w) == 0 && got == nil {
			return nil // an empty object is no field (a Go struct marshals one)
		}
		if !ok {
			return fmt.Errorf("%s: got %v, want an object", path, got)
		}
		for k, v := range w {
			if err := within(v, g[k], path+"."+k); err != nil {
				return err
			}
		}
		return nil
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Errorf("%s: got %v, want %v", path, got, want)
		}
		for i := range w {
			if err := within(w[i], g[i], fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	default:
		// Numbers decode as int64 or float64 depending on the reader, and a quantity written
		// as a number reads back as a string: compare as JSON, a number as its text too.
		a, _ := json.Marshal(want)
		b, _ := json.Marshal(got)
		if s, isString := got.(string); isString && string(a) == s {
			return nil
		}
		if !reflect.DeepEqual(a, b) {
			return fmt.Errorf("%s: got %s, want %s", path, b, a)
		}
		return nil
	}
}

var (
	pyJobVersions = []func() runtime.Object{
		typed(&trainingv1alpha1.PyJob{}, trainingv1alpha1.GroupVersion), typed(&trainingv1beta1.PyJob{}, trainingv1beta1.GroupVersion)}
	inferenceServiceVersions = []func() runtime.Object{
		typed(&servingv1alpha1.InferenceService{}, servingv1alpha1.GroupVersion), typed(&servingv1beta1.InferenceService{}, servingv1beta1.GroupVersion)}
	// versionedKinds are the samples, and the v1alpha1 manifests they were before v1beta1.
	versionedKinds = []servedVersions{
		{samples: "config/samples/pyjob-*.yaml", group: "training.kiln.dev", versions: pyJobVersions,
			writtenDefaults: map[string]any{"spec.output.reclaimPolicy": "Retain", "spec.dataset.readOnly": true}},
		{samples: "test/testdata/v1alpha1-samples/pyjob-*.yaml", group: "training.kiln.dev", versions: pyJobVersions},
		{samples: "config/samples/serving/*.yaml", group: "serving.kiln.dev", versions: inferenceServiceVersions},
		{samples: "test/testdata/v1alpha1-samples/serving/*.yaml", group: "serving.kiln.dev", versions: inferenceServiceVersions},
		{samples: "config/samples/mpijob-*.yaml", group: "kubeflow.org", versions: []func() runtime.Object{
			typed(&kubeflowv1.MPIJob{}, kubeflowv1.GroupVersion), typed(&kubeflowv2beta1.MPIJob{}, kubeflowv2beta1.GroupVersion)}},
	}
)

// dropIfAdded removes the field at path from obj when it holds value and was not in before.
func dropIfAdded(obj, before map[string]any, value any, path ...string) {
	if _, had, _ := unstructured.NestedFieldNoCopy(before, path...); had {
		return
	}
	if got, has, _ := unstructured.NestedFieldNoCopy(obj, path...); has && reflect.DeepEqual(got, value) {
		unstructured.RemoveNestedField(obj, path...)
	}
}

// typed makes new objects like obj, their TypeMeta set to its kind at gv.
func typed(obj runtime.Object, gv schema.GroupVersion) func() runtime.Object {
	kind := reflect.TypeOf(obj).Elem().Name()
	return func() runtime.Object {
		o := obj.DeepCopyObject()
		o.GetObjectKind().SetGroupVersionKind(gv.WithKind(kind))
		return o
	}
}

// convert converts from into to, through hub (a new object of the hub version) when neither is it.
func convert(from, to runtime.Object, hub conversion.Hub) error {
	if h, ok := from.(conversion.Hub); ok {
		hub = h
	} else if err := from.(conversion.Convertible).ConvertTo(hub); err != nil {
		return err
	}
	if _, ok := to.(conversion.Hub); ok {
		reflect.ValueOf(to).Elem().Set(reflect.ValueOf(hub).Elem())
		return nil
	}
	return to.(conversion.Convertible).ConvertFrom(hub)
}
