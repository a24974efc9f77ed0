package watchtrim

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
)

const (
	jsonWatchType = "application/json;stream=watch"
	jobSetsURL    = "https://apiserver/apis/jobset.x-k8s.io/v1alpha2/namespaces/team-a/jobsets?watch=true&resourceVersion=1"
)

var (
	jobSetScheme = func() *runtime.Scheme {
		s := runtime.NewScheme()
		if err := jobsetv1alpha2.AddToScheme(s); err != nil {
			panic(err)
		}
		if err := metav1.AddMetaToScheme(s); err != nil {
			panic(err)
		}
		return s
	}()
	jsonObjects = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, jobSetScheme, jobSetScheme, kjson.SerializerOptions{})

	// testCuts are the cuts of the tests: a JobSet's templates and dependencies, as kiln's cache.
	testCuts = map[schema.GroupResource][]Cut{
		{Group: "jobset.x-k8s.io", Resource: "jobsets"}: {{"spec", "replicatedJobs", "*", "template"}, {"spec", "replicatedJobs", "*", "dependsOn"}},
	}
)

// testJobSet is a JobSet as the apiserver sends it once it runs: two replicated jobs with pod
// templates, managedFields of two writers, a status.
func testJobSet() *jobsetv1alpha2.JobSet {
	template := batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Parallelism: new(int32(4)), Template: corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
		Spec:       testPod().Spec,
	}}}
	return &jobsetv1alpha2.JobSet{
		TypeMeta: metav1.TypeMeta{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "team-a", UID: "7e1f", ResourceVersion: "5001", Generation: 1,
			Labels:          map[string]string{"trainer.kubeflow.org/trainjob-name": "train"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: "train", UID: "9a8b", Controller: new(true)}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kiln", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "jobset.x-k8s.io/v1alpha2", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:replicatedJobs":{}}}`)}},
				{Manager: "jobset", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "jobset.x-k8s.io/v1alpha2", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{}}`)}, Subresource: "status"},
			},
		},
		Spec: jobsetv1alpha2.JobSetSpec{
			ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{
				{Name: "dataset-initializer", Replicas: 1, Template: template},
				{Name: "node", Replicas: 1, Template: template, DependsOn: []jobsetv1alpha2.DependsOn{{Name: "dataset-initializer", Status: jobsetv1alpha2.DependencyComplete}}},
			},
			Suspend: new(false),
		},
		Status: jobsetv1alpha2.JobSetStatus{
			Conditions:           []metav1.Condition{{Type: "Completed", Status: metav1.ConditionTrue, Reason: "AllJobsCompleted", LastTransitionTime: metav1.Unix(1700000005, 0)}},
			ReplicatedJobsStatus: []jobsetv1alpha2.ReplicatedJobStatus{{Name: "node", Ready: 1, Succeeded: 1}},
		},
	}
}

// jsonStream is a JSON watch stream of the events, encoded as kube-apiserver does: one line each.
func jsonStream(t testing.TB, evs ...watch.Event) []byte {
	return encoded(t, func(w io.Writer) io.Writer { return w }, jsonObjects, jsonObjects, evs...)
}

// jsonDecode reads a JSON watch stream as client-go's reflector does.
func jsonDecode(t testing.TB, body io.ReadCloser) ([]watch.Event, error) {
	return decoded(t, kjson.Framer.NewFrameReader(body), jsonObjects, jsonObjects)
}

func TestJobSetsArriveWithoutTemplatesOrManagedFieldsAndTheRestUnchanged(t *testing.T) {
	bookmark := &jobsetv1alpha2.JobSet{TypeMeta: testJobSet().TypeMeta,
		ObjectMeta: metav1.ObjectMeta{ResourceVersion: "6000", Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
	gone := &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure,
		Code: http.StatusGone, Reason: metav1.StatusReasonExpired, Message: "too old resource version"}
	trimmed := testJobSet()
	trimmed.ManagedFields = nil
	for i := range trimmed.Spec.ReplicatedJobs {
		trimmed.Spec.ReplicatedJobs[i].Template, trimmed.Spec.ReplicatedJobs[i].DependsOn = batchv1.JobTemplateSpec{}, nil
	}
	body := jsonStream(t, watch.Event{Type: watch.Added, Object: testJobSet()}, watch.Event{Type: watch.Bookmark, Object: bookmark},
		watch.Event{Type: watch.Error, Object: gone}, watch.Event{Type: watch.Modified, Object: testJobSet()})
	want := []watch.Event{{Type: watch.Added, Object: trimmed}, {Type: watch.Bookmark, Object: bookmark},
		{Type: watch.Error, Object: gone}, {Type: watch.Modified, Object: trimmed}}
	readEachWay(t, want, func(wrap func(io.Reader) io.Reader) ([]watch.Event, error) {
		return jsonDecode(t, throughURL(t, jobSetsURL, jsonWatchType, body, wrap))
	})
}

// Any other custom resource's objects lose their managedFields alone: a JobSet's members are
// cut only from JobSets.
func TestOtherResourcesLoseManagedFieldsAlone(t *testing.T) {
	body := jsonStream(t, watch.Event{Type: watch.Added, Object: testJobSet()})
	want := testJobSet()
	want.ManagedFields = nil
	got, err := jsonDecode(t, throughURL(t, "https://apiserver/apis/example.com/v1/jobsets?watch=1", jsonWatchType, body, nil))
	if !errors.Is(err, io.EOF) || len(got) != 1 {
		t.Fatalf("got %d events, %v; want one, then io.EOF", len(got), err)
	}
	if d := cmp.Diff(want, got[0].Object); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestWhatIsNotAJSONWatchEventPassesUnchanged(t *testing.T) {
	event := jsonStream(t, watch.Event{Type: watch.Added, Object: testJobSet()})
	pretty := bytes.Replace(event, []byte(`{"type"`), []byte("{\n  \"type\""), 1)
	for name, c := range map[string]struct {
		url, contentType string
		body             []byte
	}{
		"a JSON list":                        {"https://apiserver/apis/jobset.x-k8s.io/v1alpha2/jobsets", "application/json", event},
		"a YAML watch":                       {jobSetsURL, "application/yaml", event},
		"an event over several lines":        {jobSetsURL, jsonWatchType, pretty},
		"an event that is not an object":     {jobSetsURL, jsonWatchType, []byte("[1,2]\n\"x\"\n")},
		"an event cut short":                 {jobSetsURL, jsonWatchType, event[:len(event)/2]},
		"an event cut short, line and all":   {jobSetsURL, jsonWatchType, append(append([]byte{}, event[:len(event)/2]...), '\n')},
		"brackets that do not close":         {jobSetsURL, jsonWatchType, []byte(`{"object":{"metadata":{"managedFields":[[}}}` + "\n")},
		"a string that does not end":         {jobSetsURL, jsonWatchType, []byte(`{"object":{"metadata":{"managedFields":"x}}}` + "\n")},
		"a member without a value":           {jobSetsURL, jsonWatchType, []byte(`{"object":{"metadata":{"managedFields"}}}` + "\n")},
		"a value after the object":           {jobSetsURL, jsonWatchType, []byte(`{"object":{"metadata":{"managedFields":1}}} 2` + "\n")},
		"an event longer than client-go's":   {jobSetsURL, jsonWatchType, []byte(`{"object":{"metadata":{"managedFields":"` + strings.Repeat("x", maxEvent) + `"}}}` + "\n")},
		"nothing after the last line's end":  {jobSetsURL, jsonWatchType, nil},
		"an object without the members":      {jobSetsURL, jsonWatchType, []byte(`{"type":"ADDED","object":{"metadata":{"name":"a"},"spec":{"replicatedJobs":[{"name":"x"}]}}}` + "\n")},
		"members of other shapes than known": {jobSetsURL, jsonWatchType, []byte(`{"object":{"metadata":[1],"spec":{"replicatedJobs":{"template":1}}}}` + "\n")},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := io.ReadAll(throughURL(t, c.url, c.contentType, c.body, iotest.HalfReader))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, c.body) {
				t.Errorf("got %.300q, want it unchanged: %.300q", got, c.body)
			}
		})
	}
}

// A stream holds a read buffer of a few KiB, however long it stays open: one grows for a line
// longer than that, and a buffer grown past a MiB goes once its line is out.
func TestAStreamHoldsASmallBufferUnlessALineNeedsMore(t *testing.T) {
	const few = 8 << 10 // what a stream of small events may hold
	small := `{"type":"ADDED","object":{"metadata":{"name":"a","namespace":"team-a"},"spec":{"replicatedJobs":[{"name":"node"}]}}}` + "\n"
	long := `{"type":"MODIFIED","object":{"metadata":{"name":"b","annotations":{"x":"` + strings.Repeat("y", 2<<20) + `"}}}}` + "\n"
	r := &jsonReader{tree: eventCuts(nil), body: io.NopCloser(io.MultiReader(
		strings.NewReader(strings.Repeat(small, 20)), strings.NewReader(long), strings.NewReader(small)))}
	var out bytes.Buffer
	p := make([]byte, 512) // as client-go's decoder reads
	held, most := 0, 0
	for {
		n, err := r.Read(p)
		out.Write(p[:n])
		if out.Len() <= 20*len(small) {
			held = max(held, cap(r.in))
		}
		most = max(most, cap(r.in))
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if want := strings.Repeat(small, 20) + long + small; out.String() != want {
		t.Fatalf("the stream came out changed: %d bytes, want %d", out.Len(), len(want))
	}
	if held > few {
		t.Errorf("reading events of %d bytes held a buffer of %d bytes, want at most %d", len(small), held, few)
	}
	if most < len(long) {
		t.Errorf("the buffer grew to %d bytes for a line of %d", most, len(long))
	}
	if cap(r.in) > few {
		t.Errorf("after the long line the stream still holds %d bytes, want at most %d", cap(r.in), few)
	}
}

// For any JSON object, the trimmed object is the object without the members cut, as
// encoding/json reads both; what is not JSON is not JSON once trimmed either.
func FuzzTrimmedJSONIsTheObjectWithoutTheCuts(f *testing.F) {
	f.Add(jsonStream(f, watch.Event{Type: watch.Added, Object: testJobSet()}))
	f.Add([]byte(`{"object":{"metadata":{"managed\u0046ields":[1],"x":"\"}"},"spec":{"replicatedJobs":[{"template":{}},{}, 3]}}}`))
	f.Add([]byte(`{ "object" : { "metadata" : { "managedFields" : null , "a" : [ ] } } , "type" : "ADDED" }`))
	tree := eventCuts(testCuts[schema.GroupResource{Group: "jobset.x-k8s.io", Resource: "jobsets"}])
	f.Fuzz(func(t *testing.T, in []byte) {
		in = bytes.TrimRight(in, "\n")
		out, ok := trimValue(nil, in, tree)
		var want any
		if json.Unmarshal(in, &want) != nil {
			if ok && json.Valid(out) {
				t.Fatalf("%q is not JSON, yet trimmed to %q, which is", in, out)
			}
			return // the line passes as it came, or trimmed client-go refuses it as it would have
		}
		if _, isObject := want.(map[string]any); !isObject {
			if ok {
				t.Fatalf("%q is not an object, yet was trimmed", in)
			}
			return
		}
		if !ok {
			t.Fatalf("the object %q was not trimmed", in)
		}
		var got any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%q trimmed to %q, which is not JSON: %v", in, out, err)
		}
		cut(want, tree)
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%q trimmed to %q (-want +got):\n%s", in, out, d)
		}
	})
}

// cut removes tree's members from a decoded JSON value, as trimValue does from its bytes.
func cut(v any, tree cuts) {
	switch v := v.(type) {
	case map[string]any:
		for name, sub := range tree {
			if name == "*" {
				continue
			}
			if sub == nil {
				delete(v, name)
			} else if m, ok := v[name]; ok {
				cut(m, sub)
			}
		}
	case []any:
		if elem, ok := tree["*"]; ok {
			for _, e := range v {
				cut(e, elem)
			}
		}
	}
}

// BenchmarkDecodeJobSetEvents is what client-go spends on each event of a stream of testJobSet,
// as the apiserver sends it and trimmed.
func BenchmarkDecodeJobSetEvents(b *testing.B) {
	benchmarkDecode(b, testJobSet(), jsonStream, func(body []byte) io.ReadCloser { return throughURL(b, jobSetsURL, jsonWatchType, body, nil) }, jsonDecode)
}
