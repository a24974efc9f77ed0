package watchtrim

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	restwatch "k8s.io/client-go/rest/watch"
)

const watchContentType = "application/vnd.kubernetes.protobuf;stream=watch"

var (
	podKind     = corev1.SchemeGroupVersion.WithKind("Pod")
	serviceKind = corev1.SchemeGroupVersion.WithKind("Service")
	objects     = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	events      = protobuf.NewRawSerializer(scheme.Scheme, scheme.Scheme)
)

// testPod is a pod as the apiserver sends it once it runs: a spec of every sort of field,
// managedFields of three writers, a status.
func testPod() *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "job-worker-0", Namespace: "team-a", UID: "5c1d", ResourceVersion: "4711", Generation: 1,
			CreationTimestamp: metav1.Unix(1700000000, 0),
			Labels:            map[string]string{"training.kubeflow.org/replica-type": "worker", "training.kubeflow.org/replica-index": "0"},
			Annotations:       map[string]string{"kiln.dev/restarts": "2", "note": "x"},
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "kubeflow.org/v1", Kind: "TFJob", Name: "job", UID: "9a8b", Controller: new(true)}},
			Finalizers:        []string{"example.com/keep"},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kiln", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:containers":{}}}`)}},
				{Manager: "kube-scheduler", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{}}`)}, Subresource: "status"},
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:phase":{}}}`)}, Subresource: "status"},
			},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "tensorflow", Image: "trainer:1", Command: []string{"python", "train.py"},
				Env:       []corev1.EnvVar{{Name: "TF_CONFIG", Value: `{"cluster":{"worker":["job-worker-0.team-a.svc:2222"]}}`}},
				Ports:     []corev1.ContainerPort{{Name: "tfjob-port", ContainerPort: 2222}},
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}},
			}},
			Volumes:     []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			NodeName:    "node-3",
			Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
		},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Unix(1700000001, 0)}},
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: "tensorflow", RestartCount: 2, Ready: true,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Unix(1700000002, 0)}},
			}},
			PodIP: "10.0.0.7",
		},
	}
}

func testService() *corev1.Service {
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: "job-worker-0", Namespace: "team-a", ResourceVersion: "4712",
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kiln", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}}},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Name: "tfjob-port", Port: 2222}}},
	}
}

// stream is a protobuf watch stream of the events, framed and encoded as kube-apiserver does.
func stream(t testing.TB, evs ...watch.Event) []byte {
	return encoded(t, protobuf.LengthDelimitedFramer.NewFrameWriter, events, objects, evs...)
}

// decode reads a protobuf watch stream as client-go's reflector does.
func decode(t testing.TB, body io.ReadCloser) ([]watch.Event, error) {
	return decoded(t, protobuf.LengthDelimitedFramer.NewFrameReader(body), events, objects)
}

// encoded is a watch stream of the events: each framed by frame, encoded by events, its object
// by objects.
func encoded(t testing.TB, frame func(io.Writer) io.Writer, events, objects runtime.Encoder, evs ...watch.Event) []byte {
	t.Helper()
	var out bytes.Buffer
	enc := restwatch.NewEncoder(streaming.NewEncoder(frame(&out), events), objects)
	for _, e := range evs {
		if err := enc.Encode(&e); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}

// decoded reads the events of frames, each decoded by events, its object by objects, until the
// stream ends.
func decoded(t testing.TB, frames io.ReadCloser, events runtime.Decoder, objects runtime.Decoder) ([]watch.Event, error) {
	t.Helper()
	return eventsOf(restwatch.NewDecoder(streaming.NewDecoder(frames, events), objects))
}

// eventsOf reads dec's events until it fails (io.EOF at the stream's end).
func eventsOf(dec watch.Decoder) ([]watch.Event, error) {
	var out []watch.Event
	for {
		typ, obj, err := dec.Decode()
		if err != nil {
			return out, err
		}
		out = append(out, watch.Event{Type: typ, Object: obj})
	}
}

// cannedTransport answers every request with one response of the body and content type.
type cannedTransport struct {
	status      int // 0: 200
	contentType string
	body        []byte
	wrap        func(io.Reader) io.Reader
	closed      *atomic.Bool // if set, set when the body is closed
}

// closeRecorder is a body that records its closing.
type closeRecorder struct {
	io.Reader
	closed *atomic.Bool
}

func (c closeRecorder) Close() error {
	c.closed.Store(true)
	if closer, ok := c.Reader.(io.Closer); ok {
		return closer.Close()
	}
	return nil
}

func (c cannedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body io.Reader = bytes.NewReader(c.body)
	if c.wrap != nil {
		body = c.wrap(body)
	}
	status := c.status
	if status == 0 {
		status = http.StatusOK
	}
	var rc io.ReadCloser = io.NopCloser(body)
	if c.closed != nil {
		rc = closeRecorder{Reader: body, closed: c.closed}
	}
	return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {c.contentType}},
		Body: rc, ContentLength: int64(len(c.body)), Request: req}, nil
}

// through sends the body through the trimming round tripper, as a response of the content type.
func through(t testing.TB, contentType string, body []byte, wrap func(io.Reader) io.Reader) io.ReadCloser {
	t.Helper()
	return throughURL(t, "https://apiserver/api/v1/pods?watch=true", contentType, body, wrap)
}

// throughURL is through for a request of the URL.
func throughURL(t testing.TB, url, contentType string, body []byte, wrap func(io.Reader) io.Reader) io.ReadCloser {
	t.Helper()
	return roundTrip(t, context.Background(), url, contentType, body, wrap).Body
}

// roundTrip is the trimming round tripper's response to a request of the URL and context,
// answered with the body as the content type.
func roundTrip(t testing.TB, ctx context.Context, url, contentType string, body []byte, wrap func(io.Reader) io.Reader) *http.Response {
	t.Helper()
	rt := Transport([]schema.GroupVersionKind{podKind, serviceKind}, testCuts)(cannedTransport{contentType: contentType, body: body, wrap: wrap})
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func withoutSpecAndManagedFields[T runtime.Object](obj T, clear func(T)) T {
	obj = obj.DeepCopyObject().(T)
	clear(obj)
	return obj
}

func TestPodsAndServicesArriveWithoutSpecOrManagedFieldsAndTheRestUnchanged(t *testing.T) {
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "c", ManagedFields: testService().ManagedFields}, Data: map[string]string{"a": "b"}}
	bookmark := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{ResourceVersion: "5000", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
	gone := &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure,
		Code: http.StatusGone, Reason: metav1.StatusReasonExpired, Message: "too old resource version"}
	in := []watch.Event{
		{Type: watch.Added, Object: testPod()}, {Type: watch.Modified, Object: testService()},
		{Type: watch.Added, Object: cm}, {Type: watch.Bookmark, Object: bookmark}, {Type: watch.Error, Object: gone},
		{Type: watch.Deleted, Object: testPod()},
	}
	trimmedPod := withoutSpecAndManagedFields(testPod(), func(p *corev1.Pod) { p.Spec, p.ManagedFields = corev1.PodSpec{}, nil })
	want := []watch.Event{
		{Type: watch.Added, Object: trimmedPod},
		{Type: watch.Modified, Object: withoutSpecAndManagedFields(testService(), func(s *corev1.Service) { s.Spec, s.ManagedFields = corev1.ServiceSpec{}, nil })},
		{Type: watch.Added, Object: cm}, {Type: watch.Bookmark, Object: bookmark}, {Type: watch.Error, Object: gone},
		{Type: watch.Deleted, Object: trimmedPod},
	}
	body := stream(t, in...)
	readEachWay(t, want, func(wrap func(io.Reader) io.Reader) ([]watch.Event, error) {
		return decode(t, through(t, watchContentType, body, wrap))
	})
}

// readEachWay checks that the events read, with the body read whole, a byte at a time and in
// halves, are want, and that the stream ends as the body did.
func readEachWay(t *testing.T, want []watch.Event, read func(wrap func(io.Reader) io.Reader) ([]watch.Event, error)) {
	t.Helper()
	for name, wrap := range map[string]func(io.Reader) io.Reader{
		"whole reads": nil, "one byte at a time": iotest.OneByteReader, "half reads": iotest.HalfReader,
	} {
		t.Run(name, func(t *testing.T) {
			got, err := read(wrap)
			if !errors.Is(err, io.EOF) {
				t.Fatalf("the stream ended with %v, want io.EOF as it ended", err)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
		})
	}
}

func TestWhatIsNotAProtobufWatchOfAKnownFormPassesUnchanged(t *testing.T) {
	event := stream(t, watch.Event{Type: watch.Added, Object: testPod()})
	garbage := []byte{0, 0, 0, 3, 0xff, 0xff, 0xff}
	var badEnvelope bytes.Buffer
	badEnvelope.Write(event[:4])
	badEnvelope.Write(bytes.Replace(event[4:], envelope, []byte("k8s\x01"), 1))
	for name, c := range map[string]struct {
		contentType string
		body        []byte
	}{
		"a protobuf list":               {"application/vnd.kubernetes.protobuf", event},
		"an event that does not parse":  {watchContentType, garbage},
		"an object of another encoding": {watchContentType, badEnvelope.Bytes()},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := io.ReadAll(through(t, c.contentType, c.body, nil))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, c.body) {
				t.Errorf("got %q, want it unchanged: %q", got, c.body)
			}
		})
	}
}

func TestAStreamCutInsideAnEventEndsUnexpectedly(t *testing.T) {
	body := stream(t, watch.Event{Type: watch.Added, Object: testPod()}, watch.Event{Type: watch.Added, Object: testPod()})
	for _, cut := range []int{len(body) - 10, len(body) - len(body)/2 + 2} {
		got, err := io.ReadAll(through(t, watchContentType, body[:cut], nil))
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("cut at %d of %d: got error %v, want io.ErrUnexpectedEOF", cut, len(body), err)
		}
		if n := int(binary.BigEndian.Uint32(got)); len(got) < 4+n {
			t.Errorf("cut at %d: the whole first event should have been handed out, got %d bytes of %d", cut, len(got), 4+n)
		}
	}
}

func TestAnEventLargerThanClientGoTakesFailsTheWatchBeforeItIsRead(t *testing.T) {
	header := binary.BigEndian.AppendUint32(nil, 1<<30)
	_, err := io.ReadAll(through(t, watchContentType, header, nil))
	if !errors.Is(err, streaming.ErrObjectTooLarge) {
		t.Errorf("got %v, want streaming.ErrObjectTooLarge", err)
	}
}

// BenchmarkDecodePodEvents is what client-go spends on each event of a stream of testPod, as
// the apiserver sends it and trimmed.
func BenchmarkDecodePodEvents(b *testing.B) {
	benchmarkDecode(b, testPod(), stream, func(body []byte) io.ReadCloser { return through(b, watchContentType, body, nil) }, decode)
}

// benchmarkDecode measures decoding a stream of 100 events of obj, as encode sends it and
// trimmed.
func benchmarkDecode(b *testing.B, obj runtime.Object, encode func(testing.TB, ...watch.Event) []byte, trim func([]byte) io.ReadCloser, decode func(testing.TB, io.ReadCloser) ([]watch.Event, error)) {
	const n = 100
	evs := make([]watch.Event, n)
	for i := range evs {
		evs[i] = watch.Event{Type: watch.Modified, Object: obj}
	}
	sent := encode(b, evs...)
	for _, trimmed := range []bool{false, true} {
		b.Run(map[bool]string{false: "as sent", true: "trimmed"}[trimmed], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var r io.ReadCloser = io.NopCloser(bytes.NewReader(sent))
				if trimmed {
					r = trim(sent)
				}
				if got, err := decode(b, r); !errors.Is(err, io.EOF) || len(got) != n {
					b.Fatal(len(got), err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
		})
	}
}
