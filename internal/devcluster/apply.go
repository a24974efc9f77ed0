package devcluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldManager owns what the dev tooling applies.
const FieldManager = "kiln-dev"

// ReadObjects decodes every YAML document of the given files (or *.yaml files of folders, but
// their kustomization.yaml).
func ReadObjects(paths ...string) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for _, p := range paths {
		files := []string{p}
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			files, _ = filepath.Glob(filepath.Join(p, "*.yaml"))
			files = slices.DeleteFunc(files, func(f string) bool { return filepath.Base(f) == "kustomization.yaml" })
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
			for {
				doc, err := r.Read()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					return nil, fmt.Errorf("reading %s: %w", f, err)
				}
				u := &unstructured.Unstructured{}
				if err := utilyaml.Unmarshal(doc, &u.Object); err != nil {
					return nil, fmt.Errorf("decoding %s: %w", f, err)
				}
				if len(u.Object) > 0 {
					objs = append(objs, u)
				}
			}
		}
	}
	return objs, nil
}

// Apply server-side applies objects, in order, into namespace ns when they have none.
func Apply(ctx context.Context, c client.Client, ns string, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		o = o.DeepCopy()
		if o.GetNamespace() == "" && ns != "" && o.GetKind() != "CustomResourceDefinition" && o.GetKind() != "Namespace" {
			o.SetNamespace(ns)
		}
		if err := c.Patch(ctx, o, client.Apply, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil { //nolint:staticcheck // unstructured apply
			return fmt.Errorf("applying %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	return nil
}

// InstallCRDs applies the CRDs of dir and waits until the apiserver serves them.
func InstallCRDs(ctx context.Context, c client.Client, dir string) error {
	objs, err := ReadObjects(dir)
	if err != nil {
		return err
	}
	if err := Apply(ctx, c, "", objs); err != nil {
		return err
	}
	return WaitEstablished(ctx, c, objs)
}

// WaitEstablished waits up to a minute until every CustomResourceDefinition among objs is
// Established: its kind is served.
func WaitEstablished(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	var waiting, why string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, o := range objs {
			if o.GetKind() != "CustomResourceDefinition" {
				continue
			}
			waiting, why = o.GetName(), ""
			// Read unstructured, so that a client of any scheme will do.
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
			var crd apiextensionsv1.CustomResourceDefinition
			if err := c.Get(ctx, client.ObjectKey{Name: o.GetName()}, u); err != nil {
				why = fmt.Sprintf(" (%v)", err)
				return false, nil
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &crd); err != nil {
				return false, err
			}
			established := false
			for _, cond := range crd.Status.Conditions {
				established = established || (cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue)
				if cond.Status != apiextensionsv1.ConditionTrue && cond.Message != "" {
					why += fmt.Sprintf(" (%s: %s)", cond.Type, cond.Message)
				}
			}
			if !established {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for CRD %s to be established%s: %w", waiting, why, err)
	}
	return nil
}
