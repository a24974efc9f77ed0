// Package watchtrim takes out of the apiserver's watch streams what kiln's cache would throw
// away as soon as it had decoded it: from protobuf streams, the spec and the managedFields of the
// kinds it is given (pods and services); from JSON streams (custom resources), managedFields and
// the members it is given (a JobSet's pod templates). The apiserver cannot leave fields out of
// what it sends; in a burst of jobs, decoding them cost kiln CPU and was a large share of the
// bytes it allocated, and a trimmed event takes much less time and far fewer bytes to decode
// (BenchmarkDecodePodEvents, BenchmarkDecodeJobSetEvents; measured: docs/performance.md,
// Measurements behind the code).
//
// Each event is rewritten before client-go reads it, so client-go decodes the same object with
// those fields empty. Anything else (error events, other kinds, an event that does not parse as
// the form described below and in json.go) passes through unchanged. The JSON streams of the
// informers NewInformer makes are not read by client-go's decoder but by theirs, which decodes
// each trimmed event's object in one pass (decode.go).
package watchtrim

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"google.golang.org/protobuf/encoding/protowire"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// The protobuf field numbers this package reads, from the generated.proto files of
// k8s.io/apimachinery and k8s.io/api (protobuf field numbers never change).
const (
	eventObject     = 2  // metav1.WatchEvent.object (runtime.RawExtension); type = 1
	rawExtensionRaw = 1  // runtime.RawExtension.raw
	unknownTypeMeta = 1  // runtime.Unknown.typeMeta (runtime.TypeMeta)
	unknownRaw      = 2  // runtime.Unknown.raw: the object's own message
	unknownEncoding = 3  // runtime.Unknown.contentEncoding
	unknownType     = 4  // runtime.Unknown.contentType
	typeAPIVersion  = 1  // runtime.TypeMeta.apiVersion
	typeKind        = 2  // runtime.TypeMeta.kind
	objectMeta      = 1  // metadata of every top-level kind (metav1.ObjectMeta)
	objectSpec      = 2  // spec of Pod and Service
	managedFields   = 17 // metav1.ObjectMeta.managedFields
)

// maxEvent is the largest event client-go's streaming decoder takes; it fails the watch on a
// larger one, and so does the protobuf reader, before holding it in memory (the JSON reader
// hands such a line out untrimmed, and client-go fails the watch).
const maxEvent = 16 << 20

// envelope starts every object the apiserver encodes as protobuf; a runtime.Unknown follows.
var envelope = []byte{0x6b, 0x38, 0x73, 0x00}

// Transport wraps a round tripper so that the watch streams it receives carry less. In a
// protobuf stream (built-in kinds), objects of the specless kinds come without their spec and
// managedFields. In a JSON stream (custom resources), every object comes without its
// managedFields, and an object of a resource cut names without those members too. It is for the
// rest.Config of a cache whose transforms drop all of that; any other client would miss them.
func Transport(specless []schema.GroupVersionKind, cut map[schema.GroupResource][]Cut) func(http.RoundTripper) http.RoundTripper {
	trimmed := make([]typeMeta, len(specless))
	for i, k := range specless {
		trimmed[i] = typeMeta{apiVersion: k.GroupVersion().String(), kind: k.Kind}
	}
	trees := map[schema.GroupResource]cuts{}
	for gr, c := range cut {
		trees[gr] = eventCuts(c)
	}
	plain := eventCuts(nil)
	return func(rt http.RoundTripper) http.RoundTripper {
		return &roundTripper{next: rt, kinds: trimmed, trees: trees, plain: plain}
	}
}

// ForCache gives a cache (opts, whose Scheme is set) HTTPClient's connection and NewInformer's
// informers: its watch streams trimmed, and the JSON ones decoded in one pass. Not with a
// cfg.Timeout: its HTTP client cancels a request when the body client-go holds is closed, and
// client-go closes the empty body it is handed at once, which would end every handed-over
// stream (its informers are then client-go's).
func ForCache(opts *cache.Options, cfg *rest.Config, specless []schema.GroupVersionKind, cut map[schema.GroupResource][]Cut) error {
	if opts.Scheme == nil {
		return errors.New("watchtrim: the cache's options have no scheme")
	}
	hc, err := HTTPClient(cfg, specless, cut)
	if err != nil {
		return err
	}
	opts.HTTPClient = hc
	if cfg.Timeout == 0 {
		opts.NewInformer = NewInformer(opts.Scheme)
	}
	return nil
}

// HTTPClient is cfg's HTTP client whose watch streams Transport trims, for a cache whose
// transforms drop the same: the spec of the specless kinds, every object's managedFields, and
// the members cut names. It shares cfg's connections (client-go keeps one transport per TLS
// configuration, whatever wraps it).
func HTTPClient(cfg *rest.Config, specless []schema.GroupVersionKind, cut map[schema.GroupResource][]Cut) (*http.Client, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(Transport(specless, cut))
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("building a cache's HTTP client: %w", err)
	}
	return c, nil
}

type typeMeta struct{ apiVersion, kind string }

type roundTripper struct {
	next  http.RoundTripper
	kinds []typeMeta
	trees map[schema.GroupResource]cuts // a JSON stream's cuts, by resource
	plain cuts                          // the cuts of other JSON streams
}

func (t *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || req.Method != http.MethodGet || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	contentType := resp.Header.Get("Content-Type")
	switch {
	case protobufWatch(contentType):
		resp.Body = &reader{body: resp.Body, kinds: t.kinds}
	case jsonWatch(req, contentType):
		tree, ok := t.trees[resourceOf(req.URL.Path)]
		if !ok {
			tree = t.plain
		}
		stream := &jsonReader{body: resp.Body, tree: tree}
		if jsonStreamFor(req, stream) {
			resp.Body = http.NoBody // client-go's watcher ends at once; the stream is read by NewInformer's
		} else {
			resp.Body = stream
		}
	default:
		return resp, nil
	}
	resp.ContentLength = -1
	return resp, nil
}

// WrappedRoundTripper is the round tripper it wraps (k8s.io/apimachinery/pkg/util/net.RoundTripperWrapper).
func (t *roundTripper) WrappedRoundTripper() http.RoundTripper { return t.next }

// protobufWatch says whether a response's content type is a protobuf watch stream: events of
// a 4-byte big-endian length and a metav1.WatchEvent, whose object is an envelope.
func protobufWatch(contentType string) bool {
	media, params, err := mime.ParseMediaType(contentType)
	return err == nil && media == "application/vnd.kubernetes.protobuf" && params["stream"] == "watch"
}

// reader hands out the stream's events one by one, each trimmed.
type reader struct {
	body  io.ReadCloser
	kinds []typeMeta
	in    []byte  // the event being read
	out   buffers // where its trimmed form is built
	left  []byte  // what is not yet handed out of the trimmed event, with its length
	size  [4]byte // the event's length as read
	err   error   // what ended the stream
}

func (r *reader) Read(p []byte) (int, error) {
	for len(r.left) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		r.err = r.next()
	}
	n := copy(p, r.left)
	r.left = r.left[n:]
	return n, nil
}

func (r *reader) Close() error { return r.body.Close() }

// next reads one event and leaves its trimmed form, length first, in r.left. A stream that
// ends between events ends with io.EOF, as the apiserver's did.
func (r *reader) next() error {
	if _, err := io.ReadFull(r.body, r.size[:]); err != nil {
		return err
	}
	n := int(binary.BigEndian.Uint32(r.size[:]))
	if n > maxEvent {
		return fmt.Errorf("a watch event of %d bytes: %w", n, streaming.ErrObjectTooLarge)
	}
	if cap(r.in) < n {
		r.in = make([]byte, n)
	}
	r.in = r.in[:n]
	if _, err := io.ReadFull(r.body, r.in); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	// The trimmed event (or the event as read) goes after its length, filled in once known.
	frame, ok := r.out.trimEvent(r.out.frame[:0], r.in, r.kinds)
	if !ok {
		frame = append(append(r.out.frame[:0], r.size[:]...), r.in...)
	}
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-len(r.size)))
	r.out.frame, r.left = frame, frame
	return nil
}

// buffers are reused from one event to the next: each layer of the event is rebuilt around the
// trimmed layer inside it.
type buffers struct{ meta, object, raw, rawExtension, frame []byte }

// trimEvent appends to frame four bytes for the event's length and the event with its object
// trimmed, or returns false when the object is not of a kind to trim or the event is not in the
// expected form.
func (b *buffers) trimEvent(frame, event []byte, kinds []typeMeta) ([]byte, bool) {
	rawExtension, ok := field(event, eventObject)
	if !ok {
		return nil, false
	}
	raw, ok := field(rawExtension, rawExtensionRaw)
	if !ok || !bytes.HasPrefix(raw, envelope) {
		return nil, false
	}
	unknown := raw[len(envelope):]
	object, ok := trimmedObject(unknown, kinds)
	if !ok {
		return nil, false
	}
	if b.object, ok = b.trimObject(b.object[:0], object); !ok {
		return nil, false
	}
	b.raw = replace(append(b.raw[:0], envelope...), unknown, unknownRaw, b.object)
	b.rawExtension = replace(b.rawExtension[:0], rawExtension, rawExtensionRaw, b.raw)
	return replace(append(frame, 0, 0, 0, 0), event, eventObject, b.rawExtension), true
}

// trimmedObject is the object the envelope's runtime.Unknown holds if it is plain protobuf of
// one of the kinds (and has each field once at most); false otherwise.
func trimmedObject(unknown []byte, kinds []typeMeta) ([]byte, bool) {
	var tm, object []byte
	var seen [unknownType + 1]bool
	f := fields{msg: unknown}
	for f.next() {
		if f.num > unknownType {
			continue
		}
		if seen[f.num] || f.typ != protowire.BytesType {
			return nil, false
		}
		seen[f.num] = true
		switch f.num {
		case unknownTypeMeta:
			tm = f.value
		case unknownRaw:
			object = f.value
		case unknownEncoding, unknownType:
			if len(f.value) > 0 {
				return nil, false
			}
		}
	}
	apiVersion, ok1 := field(tm, typeAPIVersion)
	kind, ok2 := field(tm, typeKind)
	if !ok1 || !ok2 || f.bad {
		return nil, false
	}
	for _, k := range kinds {
		if string(apiVersion) == k.apiVersion && string(kind) == k.kind {
			return object, true
		}
	}
	return nil, false
}

// trimObject appends the object without its spec and with its metadata without managedFields.
func (b *buffers) trimObject(dst, object []byte) ([]byte, bool) {
	f := fields{msg: object}
	for f.next() {
		switch {
		case f.num == objectSpec:
		case f.num == objectMeta && f.typ == protowire.BytesType:
			b.meta = b.meta[:0]
			m := fields{msg: f.value}
			for m.next() {
				if m.num != managedFields {
					b.meta = append(b.meta, m.whole...)
				}
			}
			if m.bad {
				return nil, false
			}
			dst = protowire.AppendTag(dst, objectMeta, protowire.BytesType)
			dst = protowire.AppendBytes(dst, b.meta)
		default:
			dst = append(dst, f.whole...)
		}
	}
	return dst, !f.bad
}

// fields walks a protobuf message field by field: for f := (fields{msg: m}); f.next(); {…},
// then f.bad says whether the message ended where it should.
type fields struct {
	msg   []byte
	num   protowire.Number
	typ   protowire.Type
	whole []byte // the field, its tag included
	value []byte // a length-delimited field's value
	bad   bool
}

func (f *fields) next() bool {
	if len(f.msg) == 0 || f.bad {
		return false
	}
	num, typ, n := protowire.ConsumeTag(f.msg)
	m := 0
	if n >= 0 {
		m = protowire.ConsumeFieldValue(num, typ, f.msg[n:])
	}
	if n < 0 || m < 0 {
		f.bad = true
		return false
	}
	f.num, f.typ, f.whole, f.value = num, typ, f.msg[:n+m], nil
	if typ == protowire.BytesType {
		f.value, _ = protowire.ConsumeBytes(f.msg[n : n+m])
	}
	f.msg = f.msg[n+m:]
	return true
}

// field is the value of msg's length-delimited field numbered num, empty if msg has none;
// false if msg does not parse, or has the field twice or of another wire type.
func field(msg []byte, num protowire.Number) ([]byte, bool) {
	var value []byte
	seen := false
	f := fields{msg: msg}
	for f.next() {
		if f.num != num {
			continue
		}
		if seen || f.typ != protowire.BytesType {
			return nil, false
		}
		value, seen = f.value, true
	}
	return value, !f.bad
}

// replace appends msg, which field found once and valid, with its field num set to value.
func replace(dst, msg []byte, num protowire.Number, value []byte) []byte {
	for f := (fields{msg: msg}); f.next(); {
		if f.num == num {
			dst = protowire.AppendTag(dst, num, protowire.BytesType)
			dst = protowire.AppendBytes(dst, value)
		} else {
			dst = append(dst, f.whole...)
		}
	}
	return dst
}
