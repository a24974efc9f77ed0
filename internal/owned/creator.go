package owned

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kiln-ml/kiln/internal/statuspatch"
)

// metadataJSON is the Accept of a create answered with the new object's metadata alone, in JSON
// (the answer is decoded without a scheme).
const metadataJSON = runtime.ContentTypeJSON + ";as=PartialObjectMetadata;g=meta.k8s.io;v=v1"

// Creator creates objects, answered with their metadata alone: how a kit without whole answers
// creates a new object (Kit.Creator). controller-runtime's client decodes a create's whole
// answer (a JobSet's pod templates), and its metadata client cannot create.
type Creator struct {
	cfg     *rest.Config
	hc      *http.Client
	mapper  meta.RESTMapper
	mu      sync.Mutex
	clients map[schema.GroupVersion]rest.Interface
}

// NewCreator creates through cfg and its HTTP client hc; mapper names each kind's resource.
func NewCreator(cfg *rest.Config, hc *http.Client, mapper meta.RESTMapper) *Creator {
	return &Creator{cfg: cfg, hc: hc, mapper: mapper, clients: map[schema.GroupVersion]rest.Interface{}}
}

// Create creates obj, of kind gvk, with fieldOwner as its field manager. obj receives the new
// object's UID, resourceVersion, generation and creation time; the rest stays as built.
func (c *Creator) Create(ctx context.Context, gvk schema.GroupVersionKind, obj client.Object, fieldOwner string) error {
	mapping, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	rc, err := c.client(gvk.GroupVersion())
	if err != nil {
		return err
	}
	body, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	req := rc.Post().Resource(mapping.Resource.Resource).Param("fieldManager", fieldOwner).
		SetHeader("Content-Type", runtime.ContentTypeJSON).SetHeader("Accept", metadataJSON).Body(body)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		req = req.Namespace(obj.GetNamespace())
	}
	res := req.Do(ctx)
	if err := res.Error(); err != nil {
		return err // the apiserver's Status, its message and all (Raw's error has its code alone)
	}
	raw, err := res.Raw()
	if err != nil {
		return err
	}
	answer := &metav1.PartialObjectMetadata{}
	if err := json.Unmarshal(raw, answer); err != nil {
		return fmt.Errorf("reading the apiserver's answer to the create of %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	setIdentity(obj, answer)
	return nil
}

// client is the REST client of gv's resources, made at its first create.
func (c *Creator) client(gv schema.GroupVersion) (rest.Interface, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rc, ok := c.clients[gv]; ok {
		return rc, nil
	}
	rc, err := statuspatch.Client(c.cfg, c.hc, gv, runtime.ContentTypeJSON)
	if err != nil {
		return nil, err
	}
	c.clients[gv] = rc
	return rc, nil
}

// setIdentity gives obj the identity and version of the object the apiserver answered with.
func setIdentity(obj client.Object, answer *metav1.PartialObjectMetadata) {
	obj.SetUID(answer.UID)
	obj.SetResourceVersion(answer.ResourceVersion)
	obj.SetGeneration(answer.Generation)
	obj.SetCreationTimestamp(answer.CreationTimestamp)
}
