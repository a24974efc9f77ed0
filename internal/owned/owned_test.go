package owned

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// Delete takes the word of a cache the kit names for a kind: an object it lacks is not read from
// the apiserver. For a kind no cache holds, the apiserver is read, and its object deleted.
func TestDeleteReadsTheApiserverOnlyForKindsNoCacheHolds(t *testing.T) {
	ctx := context.Background()
	parent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "parent", Namespace: "ns", UID: "p"}}
	owner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "parent", UID: "p", Controller: new(true)}}
	cachedDep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "cached", Namespace: "ns", UID: "d1", OwnerReferences: owner}}
	unlabeledDep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "unlabeled", Namespace: "ns", UID: "d2", OwnerReferences: owner}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "ns", UID: "s1", OwnerReferences: owner}}
	apiserver := fake.NewClientBuilder().WithObjects(cachedDep, unlabeledDep, svc).Build()
	cache := fake.NewClientBuilder().WithObjects(cachedDep.DeepCopy()).Build() // holds Deployments with kiln's labels
	reads := &countingReader{Reader: apiserver}
	kit := Kit{Client: apiserver, Reader: reads, ParentKind: "ConfigMap",
		Cached: func(o client.Object) client.Reader {
			if _, ok := o.(*appsv1.Deployment); ok {
				return cache
			}
			return nil
		}}

	for _, name := range []string{"absent", "unlabeled"} {
		if err := kit.Delete(ctx, parent, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}); err != nil {
			t.Fatalf("deleting Deployment %s: %v", name, err)
		}
	}
	if reads.n != 0 {
		t.Errorf("the apiserver was read %d times for Deployments its cache lacks, want 0", reads.n)
	}
	if err := apiserver.Get(ctx, client.ObjectKeyFromObject(unlabeledDep), &appsv1.Deployment{}); err != nil {
		t.Errorf("a Deployment the cache does not hold was touched: %v", err)
	}
	if err := kit.Delete(ctx, parent, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "cached", Namespace: "ns"}}); err != nil {
		t.Fatal(err)
	}
	if err := apiserver.Get(ctx, client.ObjectKeyFromObject(cachedDep), &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("the parent's cached Deployment is still there (%v)", err)
	}

	if err := kit.Delete(ctx, parent, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "ns"}}); err != nil {
		t.Fatal(err)
	}
	if reads.n != 1 {
		t.Errorf("the apiserver was read %d times for a Service (no cache holds Services), want 1", reads.n)
	}
	if err := apiserver.Get(ctx, client.ObjectKeyFromObject(svc), &corev1.Service{}); !apierrors.IsNotFound(err) {
		t.Errorf("the parent's Service, read from the apiserver, is still there (%v)", err)
	}
}

type countingReader struct {
	client.Reader
	n int
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.n++
	return r.Reader.Get(ctx, key, obj, opts...)
}
