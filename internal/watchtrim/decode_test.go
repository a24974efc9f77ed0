package watchtrim

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// clientGoObjects decodes objects as the decoder of controller-runtime's structured clients:
// the scheme's JSON serializer, the kind cleared (serializer.WithoutConversionCodecFactory).
var clientGoObjects = serializer.WithoutConversionCodecFactory{CodecFactory: serializer.NewCodecFactory(jobSetScheme)}.
	DecoderToVersion(jsonObjects, nil)

// clientGoDecode reads a JSON watch stream as a cache's informer does without NewInformer.
func clientGoDecode(t testing.TB, body io.ReadCloser) ([]watch.Event, error) {
	return decoded(t, kjson.Framer.NewFrameReader(body), jsonObjects, clientGoObjects)
}

// oneDecode reads the JSON watch stream of the URL and body as NewInformer's informers do:
// handed over by the round tripper, decoded by an eventDecoder of JobSets.
func oneDecode(t testing.TB, url string, body []byte, wrap func(io.Reader) io.Reader) ([]watch.Event, error) {
	t.Helper()
	return eventsOf(jobSetDecoder(t, url, body, wrap))
}

func jobSetDecoder(t testing.TB, url string, body []byte, wrap func(io.Reader) io.Reader) *eventDecoder {
	t.Helper()
	h := &handoff{}
	resp := roundTrip(t, context.WithValue(context.Background(), handoffKey{}, h), url, jsonWatchType, body, wrap)
	if resp.Body != http.NoBody || h.stream == nil {
		t.Fatal("the round tripper did not hand the JSON stream over")
	}
	return &eventDecoder{stream: h.stream, gvk: jobsetv1alpha2.SchemeGroupVersion.WithKind("JobSet"), typ: reflect.TypeFor[jobsetv1alpha2.JobSet]()}
}

// Every event decoded in one pass is the event client-go's decoder makes of the same stream:
// objects trimmed, of no kind, errors as Status, bookmarks; however the body is read.
func TestOneDecodeMakesWhatClientGoMakes(t *testing.T) {
	bookmark := &jobsetv1alpha2.JobSet{TypeMeta: testJobSet().TypeMeta,
		ObjectMeta: metav1.ObjectMeta{ResourceVersion: "6000", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
	gone := &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure,
		Code: http.StatusGone, Reason: metav1.StatusReasonExpired, Message: "too old resource version"}
	unusual := testJobSet() // members client-go keeps as they are: an escaped name, a large integer
	unusual.Name, unusual.Spec.ReplicatedJobs[0].Template.Spec.ActiveDeadlineSeconds = "tr\u00e4in", new(int64(1<<53+1))
	body := jsonStream(t, watch.Event{Type: watch.Added, Object: testJobSet()}, watch.Event{Type: watch.Bookmark, Object: bookmark},
		watch.Event{Type: watch.Error, Object: gone}, watch.Event{Type: watch.Modified, Object: unusual},
		watch.Event{Type: watch.Deleted, Object: testJobSet()})
	// the same event as another encoder may write it: spaces, members in another order
	body = append(body, []byte(`{ "object": {"kind":"JobSet","apiVersion":"jobset.x-k8s.io/v1alpha2","metadata":{"name":"b"}}, "type": "ADDED" }`+"\n")...)
	want, err := clientGoDecode(t, throughURL(t, jobSetsURL, jsonWatchType, body, nil))
	if !errors.Is(err, io.EOF) || len(want) != 6 {
		t.Fatalf("client-go read %d events, then %v", len(want), err)
	}
	if want[0].Object.GetObjectKind().GroupVersionKind().Kind != "" {
		t.Fatal("client-go's objects should have no kind: the test does not decode as controller-runtime does")
	}
	readEachWay(t, want, func(wrap func(io.Reader) io.Reader) ([]watch.Event, error) {
		return oneDecode(t, jobSetsURL, body, wrap)
	})
}

// An event not of kube-apiserver's form is refused, and the watch fails: as client-go's decoder
// refuses the first three; client-go would have read the first value of a line of several, and
// handed an object of another kind to the reflector, which drops it.
func TestAnEventNotAsTheApiserverWritesItIsRefused(t *testing.T) {
	for name, c := range map[string]struct {
		line, want string
	}{
		"another type":   {`{"type":"CHANGED","object":{}}`, "got invalid watch event type: CHANGED"},
		"no JSON":        {`{"type":"ADDED","object":{"metadata":}}`, "unable to decode watch event: invalid character"},
		"no kind":        {`{"type":"ADDED","object":{"metadata":{"name":"a"}}}`, `an object of apiVersion "" and kind ""`},
		"another kind":   {`{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a"}}}`, `an object of apiVersion "v1" and kind "Pod" in a watch of jobset.x-k8s.io/v1alpha2, Kind=JobSet`},
		"several values": {`{"type":"ADDED","object":{"kind":"JobSet","apiVersion":"jobset.x-k8s.io/v1alpha2"}} {}`, "after top-level value"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := oneDecode(t, jobSetsURL, []byte(c.line+"\n"), nil)
			if err == nil || errors.Is(err, io.EOF) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error saying %q", err, c.want)
			}
		})
	}
}

// A stream cut inside an event ends as client-go's ends it (io.ErrUnexpectedEOF, which its
// watcher takes for a connection gone, not a bad event); an event longer than client-go takes
// fails the watch.
func TestAStreamCutOffOrTooLongFailsAsClientGosWould(t *testing.T) {
	event := jsonStream(t, watch.Event{Type: watch.Added, Object: testJobSet()})
	got, err := oneDecode(t, jobSetsURL, append(append([]byte{}, event...), event[:len(event)/2]...), iotest.HalfReader)
	if !errors.Is(err, io.ErrUnexpectedEOF) || len(got) != 1 {
		t.Errorf("cut off: got %d events, then %v; want one, then io.ErrUnexpectedEOF", len(got), err)
	}
	long := []byte(`{"type":"ADDED","object":{"metadata":{"name":"` + strings.Repeat("x", maxEvent) + `"}}}` + "\n")
	for name, body := range map[string][]byte{"a long line": long, "a long line, cut off": long[:maxEvent+10]} {
		if got, err := oneDecode(t, jobSetsURL, append(append([]byte{}, event...), body...), nil); !errors.Is(err, streaming.ErrObjectTooLarge) || len(got) != 1 {
			t.Errorf("%s: got %d events, then %v; want one, then streaming.ErrObjectTooLarge", name, len(got), err)
		}
	}
}

// Through client-go's REST client, as a cache's informer watches: the JSON stream goes to the
// informer's decoder, client-go's own watcher gets nothing; a protobuf stream, a list and an
// error are client-go's as before.
func TestAnInformersWatchIsDecodedOnceThroughClientGo(t *testing.T) {
	body := jsonStream(t, watch.Event{Type: watch.Added, Object: testJobSet()}, watch.Event{Type: watch.Modified, Object: testJobSet()})
	want, err := clientGoDecode(t, throughURL(t, jobSetsURL, jsonWatchType, body, nil))
	if !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	canned := &cannedTransport{contentType: jsonWatchType, body: body}
	lw := jobSetListWatch(t, canned)
	for name, lw := range map[string]toolscache.ListerWatcherWithContext{"client-go": lw, "one decode": decodingOf(t, lw)} {
		t.Run(name, func(t *testing.T) {
			w, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			var got []watch.Event
			for e := range w.ResultChan() {
				got = append(got, e)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
		})
	}
	t.Run("read by the informer's decoder", func(t *testing.T) { // whose refusal names the watch's kind, client-go's does not
		canned.body = []byte(`{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a"}}}` + "\n")
		w, err := decodingOf(t, lw).WatchWithContext(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		e := <-w.ResultChan()
		if status, ok := e.Object.(*metav1.Status); e.Type != watch.Error || !ok || !strings.Contains(status.Message, "in a watch of jobset.x-k8s.io/v1alpha2, Kind=JobSet") {
			t.Errorf("got %v %#v, want an error event of the informer's decoder", e.Type, e.Object)
		}
	})
	t.Run("stopped", func(t *testing.T) { // the stream it was handed is closed
		open, _ := io.Pipe() // a watch that stays open until it is closed
		canned.body, canned.closed, canned.wrap = body, &atomic.Bool{}, func(io.Reader) io.Reader { return open }
		defer func() { canned.closed, canned.wrap = nil, nil }()
		w, err := decodingOf(t, lw).WatchWithContext(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w.Stop()
		if !canned.closed.Load() {
			open.Close() // ends the decoder's read
			t.Fatal("the watch stopped, its stream is still open")
		}
		for range w.ResultChan() { // and its decoder ends
		}
	})
	t.Run("an error", func(t *testing.T) {
		canned.status, canned.contentType = http.StatusForbidden, "application/json"
		canned.body = []byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"jobsets is forbidden","reason":"Forbidden","code":403}`)
		_, err := decodingOf(t, lw).WatchWithContext(context.Background(), metav1.ListOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "jobsets is forbidden") {
			t.Errorf("got %v, want client-go's error for a 403", err)
		}
	})
}

// jobSetListWatch is the ListerWatcher controller-runtime's cache builds for JobSets, over a
// REST client whose transport is watchtrim's around canned.
func jobSetListWatch(t *testing.T, canned *cannedTransport) *toolscache.ListWatch {
	t.Helper()
	cfg := &rest.Config{Host: "https://apiserver", Transport: canned}
	hc, err := HTTPClient(cfg, nil, testCuts)
	if err != nil {
		t.Fatal(err)
	}
	client, err := apiutil.RESTClientForGVK(jobsetv1alpha2.SchemeGroupVersion.WithKind("JobSet"), false, false, cfg,
		serializer.NewCodecFactory(jobSetScheme), hc)
	if err != nil {
		t.Fatal(err)
	}
	return &toolscache.ListWatch{WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		opts.Watch = true
		return client.Get().Namespace("team-a").Resource("jobsets").VersionedParams(&opts, metav1.ParameterCodec).Watch(ctx)
	}}
}

func decodingOf(t *testing.T, lw toolscache.ListerWatcher) *decoding {
	t.Helper()
	d, ok := decodingFor(lw, &jobsetv1alpha2.JobSet{}, jobSetScheme)
	if !ok {
		t.Fatal("JobSets are typed objects of the scheme: their watches should be decoded once")
	}
	return d
}

func TestOnlyTypedObjectsOfTheSchemeAreDecodedOnce(t *testing.T) {
	lw := &toolscache.ListWatch{}
	kind := jobsetv1alpha2.SchemeGroupVersion.WithKind("JobSet")
	untyped := &unstructured.Unstructured{}
	untyped.SetGroupVersionKind(kind)
	metadata := &metav1.PartialObjectMetadata{}
	metadata.SetGroupVersionKind(kind)
	for _, obj := range []runtime.Object{untyped, metadata, &batchv1.Job{}} { // a Job: not of the scheme
		if _, ok := decodingFor(lw, obj, jobSetScheme); ok {
			t.Errorf("%T: decoded once, want client-go's decoder", obj)
		}
	}
	if _, ok := decodingFor(lw, &jobsetv1alpha2.JobSet{}, jobSetScheme); !ok {
		t.Error("JobSets are decoded by client-go, want once")
	}
}

// Through controller-runtime's cache: the watch requests of the JobSet informer it makes with
// NewInformer carry the handoff, so their JSON streams go to the informer's decoder (the
// round tripper's part, and the decoder's, are the tests above).
func TestTheCachesInformersDecodeOnce(t *testing.T) {
	list := []byte(`{"kind":"JobSetList","apiVersion":"jobset.x-k8s.io/v1alpha2","metadata":{"resourceVersion":"1"},"items":[]}`)
	watches := make(chan bool, 10)
	cfg := &rest.Config{Host: "https://apiserver", Transport: listOrWatch{list: list, watches: watches}}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(jobsetv1alpha2.SchemeGroupVersion.WithKind("JobSet"), meta.RESTScopeNamespace)
	opts := cache.Options{Scheme: jobSetScheme, Mapper: mapper}
	if err := ForCache(&opts, cfg, nil, testCuts); err != nil {
		t.Fatal(err)
	}
	c, err := cache.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() { _ = c.Start(ctx) }()
	go func() { _, _ = c.GetInformer(ctx, &jobsetv1alpha2.JobSet{}) }()
	select {
	case handedOver := <-watches:
		if !handedOver {
			t.Error("the informer's watch request carries no handoff: its stream would be client-go's to decode")
		}
	case <-ctx.Done():
		t.Fatal("the informer never watched")
	}
}

// listOrWatch answers a list request with the list, a watch request with an empty stream, and
// says on watches whether each watch request carried a handoff.
type listOrWatch struct {
	list    []byte
	watches chan<- bool
}

func (l listOrWatch) RoundTrip(req *http.Request) (*http.Response, error) {
	body := l.list
	if req.URL.Query().Get("watch") == "true" {
		_, handedOver := req.Context().Value(handoffKey{}).(*handoff)
		select {
		case l.watches <- handedOver:
		default:
		}
		body = nil
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Request: req}, nil
}

// With a client timeout the cache's informers are client-go's (ForCache).
func TestACacheWithAClientTimeoutDecodesAsClientGo(t *testing.T) {
	for timeout, want := range map[time.Duration]bool{0: true, time.Minute: false} {
		opts := cache.Options{Scheme: jobSetScheme}
		if err := ForCache(&opts, &rest.Config{Host: "https://apiserver", Timeout: timeout}, nil, nil); err != nil {
			t.Fatal(err)
		}
		if got := opts.NewInformer != nil; got != want {
			t.Errorf("timeout %v: informers decoding once %v, want %v", timeout, got, want)
		}
	}
}

// BenchmarkOneDecodeJobSetEvents is what NewInformer's decoder spends on each event of a
// stream of testJobSet, trimmed (BenchmarkDecodeJobSetEvents: client-go's).
func BenchmarkOneDecodeJobSetEvents(b *testing.B) {
	const n = 100
	evs := make([]watch.Event, n)
	for i := range evs {
		evs[i] = watch.Event{Type: watch.Modified, Object: testJobSet()}
	}
	sent := jsonStream(b, evs...)
	b.ReportAllocs()
	for b.Loop() {
		if got, err := oneDecode(b, jobSetsURL, sent, nil); !errors.Is(err, io.EOF) || len(got) != n {
			b.Fatal(len(got), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
}
