package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	kubeflowv2beta1 "github.com/kiln-ml/kiln/api/kubeflow.org/v2beta1"
	servingv1beta1 "github.com/kiln-ml/kiln/api/serving/v1beta1"
	trainingv1beta1 "github.com/kiln-ml/kiln/api/training/v1beta1"
	"github.com/kiln-ml/kiln/internal/devcluster"
	"github.com/kiln-ml/kiln/test/testenv"
)

// servedVersions are, per kiln kind served at more than one version, its samples, its group and
// a new object of each version besides the stored one (which converts to it).
type servedVersions struct {
	samples, group string
	others         []func() conversion.Convertible
}

// TestSamplesReadTheSameAtEveryVersion: each sample manifest of a kind served at several versions
// applies unchanged and reads back, at the stored version and at every other (converted back in
// memory), as what was applied (plus the schema's defaults).
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
				stored := &unstructured.Unstructured{}
				stored.SetGroupVersionKind(applied.GroupVersionKind())
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(applied), stored); err != nil {
					t.Fatal(err)
				}
				if err := within(applied.Object["spec"], stored.Object["spec"], "spec"); err != nil {
					t.Errorf("read at %s: %v", applied.GetAPIVersion(), err)
				}
				for _, other := range kind.others {
					at := other()
					if err := env.Client.Get(ctx, client.ObjectKeyFromObject(applied), at.(client.Object)); err != nil {
						t.Fatalf("reading at %T: %v", at, err)
					}
					hub, err := env.Client.Scheme().New(applied.GroupVersionKind())
					if err != nil {
						t.Fatal(err)
					}
					if err := at.ConvertTo(hub.(conversion.Hub)); err != nil {
						t.Fatal(err)
					}
					back, err := runtime.DefaultUnstructuredConverter.ToUnstructured(hub)
					if err != nil {
						t.Fatal(err)
					}
					if err := within(stored.Object["spec"], back["spec"], "spec"); err != nil {
						t.Errorf("read at %T and converted back: %v", at, err)
					}
					if err := within(back["spec"], stored.Object["spec"], "spec"); err != nil {
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
					if err := within(stored.Object["spec"], again.Object["spec"], "spec"); err != nil {
						t.Errorf("written back at %T: %v", at, err)
					}
					if err := within(again.Object["spec"], stored.Object["spec"], "spec"); err != nil {
						t.Errorf("written back at %T, it has more: %v", at, err)
					}
					if !maps.Equal(stored.GetAnnotations(), again.GetAnnotations()) {
						t.Errorf("written back at %T, annotations %v, were %v", at, again.GetAnnotations(), stored.GetAnnotations())
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

var versionedKinds = []servedVersions{
	{samples: "config/samples/pyjob-*.yaml", group: "training.kiln.dev", others: []func() conversion.Convertible{func() conversion.Convertible { return &trainingv1beta1.PyJob{} }}},
	{samples: "config/samples/serving/*.yaml", group: "serving.kiln.dev", others: []func() conversion.Convertible{func() conversion.Convertible { return &servingv1beta1.InferenceService{} }}},
	{samples: "config/samples/mpijob-*.yaml", group: "kubeflow.org", others: []func() conversion.Convertible{func() conversion.Convertible { return &kubeflowv2beta1.MPIJob{} }}},
}
