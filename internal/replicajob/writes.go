package replicajob

import (
	"context"
	"fmt"
	"net/http"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kiln-ml/kiln/internal/statuspatch"
)

// childWriter creates and deletes a job's pods, services and batch Jobs. The engine learns what it wrote
// from the cache, never from the apiserver's answer, so the writer asks for the object's metadata
// only in return and does not decode it: controller-runtime's client decodes every answer, and a
// deletion's twice more (to JSON and back): decoding was a large part of the CPU kiln spent
// writing pods and services (measured: docs/performance.md, Measurements behind the code).
// It is the Wire of the engine's owned.Kit.
type childWriter struct{ core, batch rest.Interface }

// newChildWriter writes through the manager's connection (cfg and its HTTP client), in protobuf.
func newChildWriter(cfg *rest.Config, hc *http.Client) (*childWriter, error) {
	core, err := statuspatch.Client(cfg, hc, corev1.SchemeGroupVersion, runtime.ContentTypeProtobuf)
	if err != nil {
		return nil, fmt.Errorf("building the client of pods and services: %w", err)
	}
	batch, err := statuspatch.Client(cfg, hc, batchv1.SchemeGroupVersion, runtime.ContentTypeProtobuf)
	if err != nil {
		return nil, fmt.Errorf("building the client of batch Jobs: %w", err)
	}
	return &childWriter{core: core, batch: batch}, nil
}

// Create creates o.
func (w *childWriter) Create(ctx context.Context, o client.Object) error {
	c, resource := w.of(o)
	return statuspatch.Send(ctx, c.Post().Namespace(o.GetNamespace()).Resource(resource).Body(o))
}

// Delete deletes o if it is still the object of that UID, its dependents in the background; a
// batch Job's in the foreground: the Job stays, being deleted, until its pod is gone, and the
// engine makes no new one meanwhile (two launchers would run at once).
func (w *childWriter) Delete(ctx context.Context, o client.Object) error {
	c, resource := w.of(o)
	propagation := metav1.DeletePropagationBackground
	if _, isJob := o.(*batchv1.Job); isJob {
		propagation = metav1.DeletePropagationForeground
	}
	opts := &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(o.GetUID())}, PropagationPolicy: &propagation}
	return statuspatch.Send(ctx, c.Delete().Namespace(o.GetNamespace()).Resource(resource).Name(o.GetName()).Body(opts))
}

// of is the client and resource of o's kind.
func (w *childWriter) of(o client.Object) (rest.Interface, string) {
	switch o.(type) {
	case *corev1.Pod:
		return w.core, "pods"
	case *corev1.Service:
		return w.core, "services"
	case *batchv1.Job:
		return w.batch, "jobs"
	}
	panic(fmt.Sprintf("replicajob writes pods, services and batch Jobs, not %T", o))
}
