// Package wire runs kiln's own ways of talking to the apiserver against kube-apiserver: the
// trimmed watches (watchtrim, protobuf and JSON), the writes whose answers are not read (statuspatch.Send), the
// status writes (statuspatch.Writer) and the applies answered with metadata (owned.Kit).
package wire

import (
	"context"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/owned"
	"github.com/kiln-ml/kiln/internal/statuspatch"
	"github.com/kiln-ml/kiln/internal/watchtrim"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env, nil)) }

// The apiserver's own watch stream, trimmed, decodes to the objects it stores without their
// spec and managedFields: the wire form watchtrim expects is the apiserver's.
func TestTheApiserversPodAndServiceEventsArriveWithoutSpecOrManagedFields(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout)
	defer cancel()
	ns := env.Namespace(t)
	cfg := rest.CopyConfig(env.Config)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.Wrap(watchtrim.Transport([]schema.GroupVersionKind{corev1.SchemeGroupVersion.WithKind("Pod"), corev1.SchemeGroupVersion.WithKind("Service")}, nil))
	trimmed, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := trimmed.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer pods.Stop()
	services, err := trimmed.CoreV1().Services(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer services.Stop()

	pod, err := direct.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i", Env: []corev1.EnvVar{{Name: "TF_CONFIG", Value: "{}"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1",
		ContainerStatuses: []corev1.ContainerStatus{{Name: "c", RestartCount: 1, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
	if pod, err = direct.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := direct.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.Containers) == 0 || len(pod.ManagedFields) == 0 || len(svc.Spec.Ports) == 0 || len(svc.ManagedFields) == 0 {
		t.Fatalf("the apiserver stored no spec or managedFields: the test shows nothing")
	}
	pod.Spec, pod.ManagedFields = corev1.PodSpec{}, nil
	svc.Spec, svc.ManagedFields = corev1.ServiceSpec{}, nil

	if got := next(t, pods); got.Type != watch.Added {
		t.Errorf("first pod event %s, want ADDED", got.Type)
	}
	if d := cmp.Diff(pod, next(t, pods).Object); d != "" {
		t.Errorf("the running pod as watched (-the apiserver's without spec and managedFields +watched):\n%s", d)
	}
	if d := cmp.Diff(svc, next(t, services).Object); d != "" {
		t.Errorf("the service as watched (-the apiserver's without spec and managedFields +watched):\n%s", d)
	}
}

// The apiserver's JSON watch stream of a custom resource, trimmed, decodes to the objects it
// stores without managedFields, and JobSets without their templates: the JSON watchtrim
// expects is the apiserver's.
func TestTheApiserversJobSetEventsArriveWithoutTemplatesOrManagedFields(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout)
	defer cancel()
	if err := env.InstallJobSetCRD(); err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(watchtrim.Transport(nil, map[schema.GroupResource][]watchtrim.Cut{
		jobsetv1alpha2.GroupVersion.WithResource("jobsets").GroupResource(): {{"spec", "replicatedJobs", "*", "template"}},
	}))
	trimmed, err := client.NewWithWatch(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := trimmed.Watch(ctx, &jobsetv1alpha2.JobSetList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	js := &jobsetv1alpha2.JobSet{TypeMeta: metav1.TypeMeta{APIVersion: jobsetv1alpha2.GroupVersion.String(), Kind: "JobSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "js", Namespace: ns, Labels: map[string]string{"a": "b"}}}
	js.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{{Name: "node", Replicas: 1}}
	js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec = corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: "node", Image: "i", Env: []corev1.EnvVar{{Name: "PET_NNODES", Value: "1"}}}}}
	if err := env.Client.Patch(ctx, js, client.Apply, client.FieldOwner("test"), client.ForceOwnership); err != nil { //nolint:staticcheck // a typed apply, as kiln's
		t.Fatal(err)
	}
	if len(js.Spec.ReplicatedJobs) == 0 || len(js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers) == 0 || len(js.ManagedFields) == 0 {
		t.Fatalf("the apiserver stored no template or managedFields: the test shows nothing")
	}
	js.TypeMeta, js.ManagedFields = metav1.TypeMeta{}, nil // a typed watch's objects come without their kind
	for i := range js.Spec.ReplicatedJobs {
		js.Spec.ReplicatedJobs[i].Template = batchv1.JobTemplateSpec{}
	}
	got := next(t, w)
	if got.Type != watch.Added {
		t.Errorf("first event %s, want ADDED", got.Type)
	}
	if d := cmp.Diff(js, got.Object); d != "" {
		t.Errorf("the JobSet as watched (-the apiserver's without templates and managedFields +watched):\n%s", d)
	}
}

func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case e, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("the watch ended")
		}
		return e
	case <-time.After(testenv.Timeout):
		t.Fatal("no event")
	}
	return watch.Event{}
}

// Writes sent without reading their answers fail as they would with Do: the engine tells a
// replaced object (a conflict), a deleted one and a name taken by another apart by the error.
func TestSentWritesComeBackWithTheApiserversErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout)
	defer cancel()
	ns := env.Namespace(t)
	cfg := rest.CopyConfig(env.Config)
	cfg.APIPath, cfg.GroupVersion = "/api", &corev1.SchemeGroupVersion
	cfg.ContentType, cfg.AcceptContentTypes = runtime.ContentTypeProtobuf, statuspatch.MetadataOnly
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	core, err := rest.RESTClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
	create := func() error { return statuspatch.Send(ctx, core.Post().Namespace(ns).Resource("pods").Body(pod)) }
	del := func(uid string) error {
		opts := &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(types.UID(uid))}}
		return statuspatch.Send(ctx, core.Delete().Namespace(ns).Resource("pods").Name("p").Body(opts))
	}
	if err := create(); err != nil {
		t.Fatalf("creating: %v", err)
	}
	created := &corev1.Pod{}
	env.Await(t, ns, "p", created)
	for what, c := range map[string]struct {
		err  error
		want func(error) bool
	}{
		"creating it again":            {create(), apierrors.IsAlreadyExists},
		"deleting another of its name": {del("not-its-uid"), apierrors.IsConflict},
	} {
		if !c.want(c.err) {
			t.Errorf("%s: got %v (%T), want the apiserver's error", what, c.err, c.err)
		}
	}
	if err := del(string(created.UID)); err != nil {
		t.Fatalf("deleting: %v", err)
	}
	if err := del(string(created.UID)); !apierrors.IsNotFound(err) {
		t.Errorf("deleting it again: got %v, want NotFound", err)
	}
}

// A status write sets the status the writer planned, and only on the version it read.
func TestStatusWritesSetTheStatusOnlyOnTheVersionRead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout)
	defer cancel()
	ns := env.Namespace(t)
	hc, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	w, err := statuspatch.NewWriter(env.Config, hc, env.Client.RESTMapper(), kubeflowv1.GroupVersion.WithKind("TFJob"))
	if err != nil {
		t.Fatal(err)
	}
	job := builder.TFJob("j", ns).Replicas("Worker", 1).Obj()
	if err := env.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	first := kubeflowv1.JobStatus{ReplicaStatuses: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaStatus{"Worker": {Active: 1}},
		Conditions: []kubeflowv1.JobCondition{{Type: kubeflowv1.JobCreated, Status: corev1.ConditionTrue, Reason: "TFJobCreated"}}}
	if err := w.Write(ctx, job, &first); err != nil {
		t.Fatalf("writing on the version read: %v", err)
	}
	// job is still the version read before the write.
	if err := w.Write(ctx, job, &kubeflowv1.JobStatus{}); !apierrors.IsConflict(err) {
		t.Errorf("writing on a version since changed: got %v, want Conflict", err)
	}
	got := &kubeflowv1.TFJob{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), got); err != nil {
		t.Fatal(err)
	}
	second := kubeflowv1.JobStatus{Conditions: first.Conditions} // no replica statuses any more
	if err := w.Write(ctx, got, &second); err != nil {
		t.Fatalf("writing on the version read: %v", err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), got); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(second, got.Status); d != "" {
		t.Errorf("status (-written +stored):\n%s", d)
	}
	if d := cmp.Diff(job.GetReplicaSpecs(), got.GetReplicaSpecs()); d != "" {
		t.Errorf("the status write changed the spec (-created +stored):\n%s", d)
	}
}

// An apply of owned.Kit comes back as the object's metadata alone, unless the kit asks for whole
// answers: the applied object receives its identity and version, and keeps what was applied
// (none of the defaults the apiserver adds); an error comes back as the apiserver's.
func TestAppliesAnswerWithTheObjectsMetadata(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout)
	defer cancel()
	ns := env.Namespace(t)
	var mu sync.Mutex
	var asked []string   // what each write asked to be answered with (Accept)
	var methods []string // every request's method
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			mu.Lock()
			methods = append(methods, req.Method)
			if req.Method == http.MethodPatch || req.Method == http.MethodPost {
				asked = append(asked, req.Method+" "+req.Header.Get("Accept"))
			}
			mu.Unlock()
			return rt.RoundTrip(req)
		})
	})
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme(), Mapper: env.Client.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	parent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "parent", Namespace: ns}}
	if err := c.Create(ctx, parent); err != nil {
		t.Fatal(err)
	}
	deployment := func(name, image string) *appsv1.Deployment {
		labels := map[string]string{"app": name}
		d := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}}}}}
		if err := controllerutil.SetControllerReference(parent, d, c.Scheme()); err != nil {
			t.Fatal(err)
		}
		return d
	}
	kit := owned.Kit{Client: c, FieldOwner: "kiln-test", ParentKind: "ConfigMap"}
	lastAsked := func() string {
		mu.Lock()
		defer mu.Unlock()
		return asked[len(asked)-1]
	}

	d := deployment("metadata", "i:1")
	if err := kit.Apply(ctx, parent, d); err != nil {
		t.Fatal(err)
	}
	if a := lastAsked(); !strings.HasPrefix(a, http.MethodPatch+" "+runtime.ContentTypeProtobuf+";as=PartialObjectMetadata") {
		t.Errorf("the apply asked for an answer of %q, want a PATCH answered with the object's metadata in protobuf", a)
	}
	stored := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(d), stored); err != nil {
		t.Fatal(err)
	}
	if d.UID != stored.UID || d.ResourceVersion != stored.ResourceVersion || d.Generation != 1 || !d.CreationTimestamp.Equal(&stored.CreationTimestamp) {
		t.Errorf("the applied object has UID %q, resourceVersion %q, generation %d, created %v; want the stored %q, %q, 1, %v",
			d.UID, d.ResourceVersion, d.Generation, d.CreationTimestamp, stored.UID, stored.ResourceVersion, stored.CreationTimestamp)
	}
	if d.Spec.RevisionHistoryLimit != nil || stored.Spec.RevisionHistoryLimit == nil {
		t.Errorf("revisionHistoryLimit applied %v, stored %v: want the applied object as applied, the default only stored", d.Spec.RevisionHistoryLimit, stored.Spec.RevisionHistoryLimit)
	}
	changed := deployment("metadata", "i:2")
	if err := kit.Apply(ctx, parent, changed); err != nil {
		t.Fatal(err)
	}
	if changed.UID != d.UID || changed.Generation != 2 {
		t.Errorf("applied again with a new image: UID %q, generation %d; want %q, 2", changed.UID, changed.Generation, d.UID)
	}

	// A kit with whole answers, whose cache holds Deployments (and has not seen this one), and
	// which may read the apiserver.
	whole := kit
	whole.WholeAnswers, whole.Reader = true, c
	whole.Cached = func(client.Object) client.Reader { return notSeen{} }
	sentSince := func(f func() error) ([]string, error) { // the methods of the requests f sent
		mu.Lock()
		before := len(methods)
		mu.Unlock()
		err := f()
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(methods[before:]), err
	}
	w := deployment("whole", "i:1")
	sent, err := sentSince(func() error { return whole.Apply(ctx, parent, w) })
	if err != nil {
		t.Fatal(err)
	}
	if a := lastAsked(); !cmp.Equal(sent, []string{http.MethodPost}) || strings.Contains(a, "PartialObjectMetadata") || w.Spec.RevisionHistoryLimit == nil || w.UID == "" {
		t.Errorf("with whole answers, a new object: sent %v asking for %q, got revisionHistoryLimit %v, UID %q; want a create (POST) alone, unread before, answered with the whole object",
			sent, a, w.Spec.RevisionHistoryLimit, w.UID)
	}
	w2 := deployment("whole", "i:2")
	if err := whole.Apply(ctx, parent, w2); err != nil {
		t.Fatal(err)
	}
	if a := lastAsked(); !strings.HasPrefix(a, http.MethodPatch+" ") || strings.Contains(a, "PartialObjectMetadata") || w2.Generation != 2 {
		t.Errorf("with whole answers, an existing object: sent %q, got generation %d; want an apply (PATCH) answered with the whole object, generation 2", a, w2.Generation)
	}

	// A kit with a Creator, its cache and reads as above: a new object is created, answered with
	// its metadata alone.
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	created := whole
	created.WholeAnswers, created.Creator = false, owned.NewCreator(cfg, hc, c.RESTMapper())
	m := deployment("created", "i:1")
	sent, err = sentSince(func() error { return created.Apply(ctx, parent, m) })
	if err != nil {
		t.Fatal(err)
	}
	if a := lastAsked(); !cmp.Equal(sent, []string{http.MethodPost}) || !strings.Contains(a, "PartialObjectMetadata") || m.UID == "" || m.Generation != 1 || m.Spec.RevisionHistoryLimit != nil {
		t.Errorf("with a Creator, a new object: sent %v asking for %q, got UID %q, generation %d, revisionHistoryLimit %v; want a create (POST) alone, unread before, answered with its metadata (UID, generation 1), the rest as built",
			sent, a, m.UID, m.Generation, m.Spec.RevisionHistoryLimit)
	}
	m2 := deployment("created", "i:2")
	if err := created.Apply(ctx, parent, m2); err != nil {
		t.Fatal(err)
	}
	if a := lastAsked(); !strings.HasPrefix(a, http.MethodPatch+" "+runtime.ContentTypeProtobuf+";as=PartialObjectMetadata") || m2.UID != m.UID || m2.Generation != 2 {
		t.Errorf("with a Creator, an existing object: sent %q, got UID %q, generation %d; want an apply (PATCH) answered with metadata, UID %q, generation 2", a, m2.UID, m2.Generation, m.UID)
	}

	invalid := deployment("invalid", "i:1")
	invalid.Spec.Template.Labels = map[string]string{"app": "another"} // its selector selects none of its pods
	if err := kit.Apply(ctx, parent, invalid); !apierrors.IsInvalid(err) {
		t.Errorf("applying a Deployment whose selector misses its pods: got %v, want the apiserver's Invalid", err)
	}
	invalid.Name = "invalid-created"
	if err := created.Apply(ctx, parent, invalid); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "does not match template") {
		t.Errorf("creating a Deployment whose selector misses its pods through a Creator: got %v, want the apiserver's Invalid with its message", err)
	}
}

// A kit that creates new objects (with whole answers, or a Creator: a create costs the apiserver
// a quarter of an apply) hands the create's fields to its apply manager at its first apply to
// it: what a later apply no longer sets goes, as from an object applied from the start. An
// object of that name that is not the parent's, come after the read, is a conflict and stays as
// it is.
func TestANewObjectIsCreatedAndLaterAppliesPruneItsFields(t *testing.T) {
	hc, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	c := env.Client
	for name, kit := range map[string]owned.Kit{
		"whole answers": {Client: c, FieldOwner: "kiln-test", ParentKind: "ConfigMap", WholeAnswers: true},
		"a Creator":     {Client: c, FieldOwner: "kiln-test", ParentKind: "ConfigMap", Creator: owned.NewCreator(env.Config, hc, c.RESTMapper())},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testenv.Timeout)
			defer cancel()
			ns := env.Namespace(t)
			parent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "parent", Namespace: ns}}
			if err := c.Create(ctx, parent); err != nil {
				t.Fatal(err)
			}
			child := func(data map[string]string, labels map[string]string) *corev1.ConfigMap {
				cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
					ObjectMeta: metav1.ObjectMeta{Name: "child", Namespace: ns, Labels: labels}, Data: data}
				if err := controllerutil.SetControllerReference(parent, cm, c.Scheme()); err != nil {
					t.Fatal(err)
				}
				return cm
			}
			managers := func() []string {
				stored := &corev1.ConfigMap{}
				if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "child"}, stored); err != nil {
					t.Fatal(err)
				}
				var out []string
				for _, m := range stored.ManagedFields {
					out = append(out, m.Manager+"/"+string(m.Operation))
				}
				return out
			}

			if err := kit.Apply(ctx, parent, child(map[string]string{"a": "1", "b": "2"}, map[string]string{"x": "1"})); err != nil {
				t.Fatal(err)
			}
			if got, want := managers(), []string{"kiln-test/Update"}; !cmp.Equal(got, want) {
				t.Errorf("after the first Apply the fields are held by %v, want %v (a create)", got, want)
			}
			applied := child(map[string]string{"a": "1"}, nil)
			if err := kit.Apply(ctx, parent, applied); err != nil {
				t.Fatal(err)
			}
			if _, kept := applied.Data["b"]; kept || applied.Labels["x"] != "" {
				t.Errorf("applied without data b and label x: the answer has data %v, labels %v; want both gone", applied.Data, applied.Labels)
			}
			if got, want := managers(), []string{"kiln-test/Apply"}; !cmp.Equal(got, want) {
				t.Errorf("after an apply the fields are held by %v, want %v", got, want)
			}
			again := child(map[string]string{"a": "2"}, nil)
			if err := kit.Apply(ctx, parent, again); err != nil || again.Data["a"] != "2" {
				t.Errorf("applied data a=2: %v, answer %v", err, again.Data)
			}

			// Another's object of a name the kit's reads did not show it (its cache has not seen it).
			foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "foreign", Namespace: ns}, Data: map[string]string{"mine": "yes"}}
			if err := c.Create(ctx, foreign); err != nil {
				t.Fatal(err)
			}
			blind := kit
			blind.Cached = func(client.Object) client.Reader { return notSeen{} }
			want := child(map[string]string{"a": "1"}, nil)
			want.Name = "foreign"
			err := blind.Apply(ctx, parent, want)
			if owned.AsConflict(err) == nil {
				t.Errorf("creating over another's object of that name: got %v, want a *Conflict", err)
			}
			stored := &corev1.ConfigMap{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(foreign), stored); err != nil || stored.Data["mine"] != "yes" || len(stored.OwnerReferences) != 0 {
				t.Errorf("another's object after the conflict: %v, data %v, owners %v; want it as it was", err, stored.Data, stored.OwnerReferences)
			}
			// Nothing is written unless the parent may have every object: another's found by the create
			// of the first object (unread), or by the read of a later one, stops them all.
			reads := blind
			reads.Reader = c
			for _, order := range [][]string{{"foreign", "unwritten"}, {"unwritten", "foreign"}} {
				var objs []client.Object
				for _, name := range order {
					o := child(map[string]string{"a": "1"}, nil)
					o.Name = name
					objs = append(objs, o)
				}
				if err := reads.ApplyAll(ctx, parent, objs, nil); owned.AsConflict(err) == nil {
					t.Errorf("applying %v, foreign another's: got %v, want a *Conflict", order, err)
				}
				if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "unwritten"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
					t.Errorf("applying %v: the parent's object was written (%v), want none written", order, err)
				}
			}
			// The parent's own object, found only by the create (its cache had not seen it): applied.
			if err := c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "child", Namespace: ns}}); err != nil {
				t.Fatal(err)
			}
			if err := kit.Apply(ctx, parent, child(map[string]string{"a": "1", "b": "2"}, nil)); err != nil {
				t.Fatal(err)
			}
			ours := child(map[string]string{"a": "3"}, nil)
			if err := blind.Apply(ctx, parent, ours); err != nil || ours.Data["a"] != "3" || ours.Data["b"] != "" {
				t.Errorf("applying the parent's own object that only the create found: %v, data %v; want a=3 and b gone", err, ours.Data)
			}
			if got, want := managers(), []string{"kiln-test/Apply"}; !cmp.Equal(got, want) {
				t.Errorf("after that apply the fields are held by %v, want %v", got, want)
			}
		})
	}
}

// notSeen is a cache that has not seen any object yet.
type notSeen struct{}

func (notSeen) Get(_ context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
}

func (notSeen) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
