package testenv

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Watch watches the objects of list's kind in namespace ns from now on, every version as the
// apiserver delivers it (what a status reader such as kstatus, Flux or Argo may see), until the
// test ends.
func (e *Env) Watch(t testing.TB, list client.ObjectList, ns string) watch.Interface {
	t.Helper()
	c, err := client.NewWithWatch(e.Config, client.Options{Scheme: e.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(context.Background(), list, client.InNamespace(ns))
	if err != nil {
		t.Fatalf("watching %T in namespace %s: %v", list, ns, err)
	}
	t.Cleanup(w.Stop)
	return w
}
