package watchtrim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	kjson "sigs.k8s.io/json"
)

// NewInformer is the informer constructor (cache.Options.NewInformer) of a cache whose HTTP
// client is HTTPClient's: the JSON watch streams of its typed objects (custom resources) are
// decoded in one pass, each event's object by one decode into the informer's type.
//
// client-go reads each event of a JSON stream five times before it has the object: its framer
// scans the event for its end, the event's kind is looked for, the event is decoded with its
// object as raw bytes, the object's kind is looked for, and the object is decoded. At the
// watch events of 1,000 TrainJobs and their JobSets, that was about a quarter of kiln's CPU
// (docs/decisions.md, 27; measured: docs/performance.md). Here the stream's lines (one
// event each, as kube-apiserver writes them and jsonReader hands them out) are split by their
// ends, and the object is the one thing decoded, into a new object of the informer's type, as
// client-go's decoder would (case-sensitive names, integers kept as integers, the kind checked
// and then cleared, as controller-runtime's decoder clears it). What the watch does at the
// end of its stream, or at an error, is client-go's: its StreamWatcher runs the decoder.
//
// Lists, protobuf streams (built-in kinds), unstructured and metadata-only informers are
// client-go's, as before.
func NewInformer(scheme *runtime.Scheme) func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer {
	return func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
		if d, ok := decodingFor(lw, obj, scheme); ok {
			lw = d
		}
		return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
	}
}

// decodingFor is lw with its JSON watch streams decoded into objects of obj's type, if obj is
// a typed object of scheme's.
func decodingFor(lw toolscache.ListerWatcher, obj runtime.Object, scheme *runtime.Scheme) (*decoding, bool) {
	switch obj.(type) {
	case runtime.Unstructured, *metav1.PartialObjectMetadata: // as controller-runtime tells them from typed objects
		return nil, false
	}
	typ := reflect.TypeOf(obj)
	if typ.Kind() != reflect.Pointer || typ.Elem().Kind() != reflect.Struct {
		return nil, false
	}
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return nil, false
	}
	return &decoding{lw: toolscache.ToListerWatcherWithContext(lw), gvk: gvk, typ: typ.Elem()}, true
}

// decoding is a ListerWatcher whose watches, when answered with a JSON stream, are read by an
// eventDecoder.
type decoding struct {
	lw  toolscache.ListerWatcherWithContext
	gvk schema.GroupVersionKind
	typ reflect.Type // the objects' struct type
}

// handoffKey marks the context of a watch request whose JSON stream the round tripper hands
// to the decoding ListerWatcher that made it (the handoff in it), rather than to client-go.
type handoffKey struct{}

// handoff is where the round tripper leaves a JSON watch stream for the ListerWatcher.
type handoff struct{ stream *jsonReader }

// jsonStreamFor says whether a watch request's JSON stream goes to the handoff of its context;
// if so, it takes the stream.
func jsonStreamFor(req *http.Request, stream *jsonReader) bool {
	h, ok := req.Context().Value(handoffKey{}).(*handoff)
	if ok {
		h.stream = stream
	}
	return ok
}

func (d *decoding) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	return d.lw.ListWithContext(ctx, opts)
}

// WatchWithContext makes the watch request as the informer's own ListerWatcher does (its
// namespace, selectors and options are that ListerWatcher's). A JSON stream comes back through
// the handoff: client-go's watcher is given an empty body, which ends it, and the stream is
// read by an eventDecoder. Anything else (an error, a protobuf stream) is client-go's.
func (d *decoding) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	h := &handoff{}
	w, err := d.lw.WatchWithContext(context.WithValue(ctx, handoffKey{}, h), opts)
	if h.stream == nil {
		return w, err
	}
	if err != nil { // a stream client-go refused (its content type): not read by anyone
		h.stream.Close()
		return nil, err
	}
	w.Stop()
	return watch.NewStreamWatcherWithLogger(klog.FromContext(ctx), &eventDecoder{stream: h.stream, gvk: d.gvk, typ: d.typ},
		// as client-go's watcher reports a stream it cannot decode
		apierrors.NewClientErrorReporter(http.StatusInternalServerError, http.MethodGet, "ClientWatchDecoding")), nil
}

func (d *decoding) List(opts metav1.ListOptions) (runtime.Object, error) {
	return d.ListWithContext(context.Background(), opts)
}

func (d *decoding) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return d.WatchWithContext(context.Background(), opts)
}

// eventDecoder reads a JSON watch stream's events (watch.Decoder).
type eventDecoder struct {
	stream *jsonReader
	gvk    schema.GroupVersionKind
	typ    reflect.Type
}

func (d *eventDecoder) Close() { d.stream.Close() }

// Decode reads the next event: what client-go's decoder would have made of it, or the error it
// would have returned (an event of another type, an object that is not JSON or of no kind). An
// object of another kind than the informer's is an error too, where client-go would have
// decoded it for the reflector to drop (docs/decisions.md, 27).
func (d *eventDecoder) Decode() (watch.EventType, runtime.Object, error) {
	line, err := d.stream.event()
	if err != nil {
		return "", nil, err
	}
	typ, object, err := splitEvent(line)
	if err != nil {
		return "", nil, err
	}
	var obj runtime.Object
	switch typ {
	case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
		obj = reflect.New(d.typ).Interface().(runtime.Object)
	case watch.Error:
		obj = &metav1.Status{}
	default:
		return "", nil, fmt.Errorf("got invalid watch event type: %v", typ)
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(object, obj); err != nil {
		return "", nil, fmt.Errorf("unable to decode watch event: %w", err)
	}
	kind := obj.GetObjectKind()
	if typ != watch.Error && kind.GroupVersionKind() != d.gvk {
		return "", nil, fmt.Errorf("unable to decode watch event: an object of apiVersion %q and kind %q in a watch of %s", kind.GroupVersionKind().GroupVersion(), kind.GroupVersionKind().Kind, d.gvk)
	}
	kind.SetGroupVersionKind(schema.GroupVersionKind{})
	return typ, obj, nil
}

var (
	eventTypeKey   = []byte(`{"type":"`)
	eventObjectKey = []byte(`","object":`)
)

// splitEvent is the type and the object of a JSON watch event: kube-apiserver writes
// {"type":"…","object":…} (metav1.WatchEvent's members, in order), read here without a decoder.
// An event of another form is decoded as client-go decodes it.
func splitEvent(line []byte) (watch.EventType, []byte, error) {
	line = bytes.TrimSuffix(line, []byte("\n"))
	if rest, ok := bytes.CutPrefix(line, eventTypeKey); ok && bytes.HasSuffix(rest, []byte("}")) {
		end := bytes.IndexByte(rest, '"')
		if end > 0 && bytes.IndexByte(rest[:end], '\\') < 0 && bytes.HasPrefix(rest[end:], eventObjectKey) {
			return watch.EventType(rest[:end]), rest[end+len(eventObjectKey) : len(rest)-1], nil
		}
	}
	var event struct {
		Type   watch.EventType `json:"type"`
		Object json.RawMessage `json:"object"`
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(line, &event); err != nil {
		return "", nil, err
	}
	return event.Type, event.Object, nil
}
