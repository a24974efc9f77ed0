// Package statuspatch writes the status of kiln's own kinds the cheap way: a JSON patch that
// sets the status alone, guarded by the resourceVersion the caller read, that asks the apiserver
// for the object's metadata only in return. Its Client and Send are how every write whose answer
// kiln does not read is sent (pods, services, batch Jobs, events).
package statuspatch

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Writer writes the status of one kind's objects through the manager's connection. A merge patch
// of whole objects costs kiln two encodings of the spec (pod templates and all) and the decoding
// of the whole object the apiserver sends back, for every write; this encodes the new status and
// decodes nothing unless the write fails. It asks the RESTMapper for the kind's resource once,
// not on every write as controller-runtime's client does.
type Writer struct {
	gvk    schema.GroupVersionKind
	mapper meta.RESTMapper
	rest   rest.Interface

	mu       sync.Mutex
	resource string // found on the first write
}

// MetadataOnly is the Accept of a write whose answer kiln does not read: the object's metadata
// only, which the apiserver encodes faster too; errors come as a Status.
const MetadataOnly = runtime.ContentTypeProtobuf + ";as=PartialObjectMetadata;g=meta.k8s.io;v=v1," + runtime.ContentTypeJSON

// Send sends a write whose answer kiln does not read and reads that answer to its end without
// keeping it (io.ReadAll of each answer, as Do does, was a noticeable share of the bytes kiln
// allocated; measured: docs/performance.md, Measurements behind the code). An error answer
// comes back as the apiserver's error, as from Do.
func Send(ctx context.Context, req *rest.Request) error {
	body, err := req.Stream(ctx)
	if err != nil {
		return err
	}
	defer body.Close()
	_, err = io.Copy(io.Discard, body)
	return err
}

// Client is a client of the resources of gv through cfg and its HTTP client hc, for writes whose
// answers kiln does not read (Send): it asks for metadata only in return (MetadataOnly), and
// encodes the objects it is given as bodies (built-in kinds) in contentType.
func Client(cfg *rest.Config, hc *http.Client, gv schema.GroupVersion, contentType string) (rest.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.APIPath, cfg.GroupVersion = "/apis", &gv
	if gv.Group == "" {
		cfg.APIPath = "/api"
	}
	cfg.ContentType, cfg.AcceptContentTypes = contentType, MetadataOnly
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	c, err := rest.RESTClientForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err // not a nil *RESTClient in a non-nil interface
	}
	return c, nil
}

// NewWriter writes statuses of kind gvk through cfg and its HTTP client hc.
func NewWriter(cfg *rest.Config, hc *http.Client, mapper meta.RESTMapper, gvk schema.GroupVersionKind) (*Writer, error) {
	c, err := Client(cfg, hc, gvk.GroupVersion(), runtime.ContentTypeJSON)
	if err != nil {
		return nil, fmt.Errorf("building the status writer of %s: %w", gvk.Kind, err)
	}
	return &Writer{gvk: gvk, mapper: mapper, rest: c}, nil
}

// Write sets the status of obj to status, if obj is still the version the caller read. obj is
// not changed. A conflict (the object changed since it was read) comes back as the apiserver's
// Conflict error.
func (w *Writer) Write(ctx context.Context, obj client.Object, status any) error {
	resource, err := w.resourceName()
	if err != nil {
		return err
	}
	patch, err := Patch(obj.GetResourceVersion(), status)
	if err != nil {
		return err
	}
	return Send(ctx, w.rest.Patch(types.JSONPatchType).Namespace(obj.GetNamespace()).Resource(resource).Name(obj.GetName()).
		SubResource("status").Body(patch))
}

func (w *Writer) resourceName() (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.resource == "" {
		m, err := w.mapper.RESTMapping(w.gvk.GroupKind(), w.gvk.Version)
		if err != nil {
			return "", fmt.Errorf("finding the resource of %s: %w (are kiln's CRDs installed?)", w.gvk.Kind, err)
		}
		w.resource = m.Resource.Resource
	}
	return w.resource, nil
}

// Patch is the JSON patch that sets the status on the version resourceVersion: the apiserver
// compares the resourceVersion it sets with the object's and answers Conflict if they differ.
// The whole status is written: the CRD's schema holds only fields kiln's types know, so there is
// nothing else in it to keep. (A merge patch of what changed cost twice the encoding, plus
// decoding both statuses again to diff them: a real cost in kiln's CPU at every write; measured:
// docs/performance.md, Measurements behind the code.)
func Patch(resourceVersion string, status any) ([]byte, error) {
	value, err := json.Marshal(status)
	if err != nil {
		return nil, fmt.Errorf("encoding the new status: %w", err)
	}
	rv, err := json.Marshal(resourceVersion)
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, `[{"op":"add","path":"/metadata/resourceVersion","value":%s},{"op":"add","path":"/status","value":%s}]`, rv, value), nil
}
