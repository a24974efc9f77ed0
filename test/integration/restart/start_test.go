package restart

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	kservev1beta1 "github.com/kiln-ml/kiln/api/serving.kserve.io/v1beta1"
	trainingv1beta1 "github.com/kiln-ml/kiln/api/training/v1beta1"
	"github.com/kiln-ml/kiln/internal/manager"
	"github.com/kiln-ml/kiln/internal/ondemand"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

// A manager told to serve KServe's InferenceService on a cluster without kiln's serving.kserve.io
// CRDs (this suite's apiserver has none) does not start, and says what to install.
func TestServingKServesKindWithoutItsCRDsSaysWhatToInstall(t *testing.T) {
	o := testenv.ManagerOptions()
	o.Kinds = []string{"kserve-inferenceservice"}
	_, err := manager.New(env.Config, o)
	if err == nil || !strings.Contains(err.Error(), "config/crd/kserve") {
		t.Fatalf("manager.New = %v, want an error that names config/crd/kserve", err)
	}
}

// A kind's controller is set up at the first object of the kind (DECISIONS #24): a JAXJob
// created after the manager started runs, and the kinds of which this suite's apiserver holds no
// object (PaddleJob, MPIJob, PyJob, TrainJob, InferenceService) get no controller.
func TestAKindsControllerIsSetUpAtItsFirstObject(t *testing.T) {
	ns := env.Namespace(t)
	logs := &setups{}
	o := testenv.ManagerOptions()
	o.Logger = funcr.New(logs.record, funcr.Options{})
	stop, err := env.StartManager(o)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	job := builder.JAXJob("first", ns).Replicas("Worker", 2).Obj()
	if err := env.Client.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	env.WaitCondition(t, job, kubeflowv1.JobCreated, 30*time.Second)
	if !logs.has("JAXJob") {
		t.Errorf("the JAXJob controller ran without being set up at the first JAXJob; set up: %v", logs.kinds())
	}
	for _, idle := range []string{"PaddleJob", "MPIJob", "PyJob", "TrainJob", "InferenceService"} {
		if logs.has(idle) {
			t.Errorf("the %s controller was set up, with no %s in the cluster; set up: %v", idle, idle, logs.kinds())
		}
	}
}

// A kind kiln may not list, or one the cluster does not serve, stops kiln with an error that says
// what to check (once the watch of its objects had its time to fill, for the first), rather than
// leaving the kind without a controller unsaid.
func TestAKindKilnCannotWatchStopsItWithAnError(t *testing.T) {
	nobody := rest.CopyConfig(env.Config)
	nobody.Impersonate = rest.ImpersonationConfig{UserName: "kiln-test-nobody"} // no role bound
	for _, tc := range []struct {
		name string
		cfg  *rest.Config
		obj  client.Object
		want string
	}{
		{"not allowed to list", nobody, &trainingv1beta1.PyJob{}, "can kiln list them?"},
		{"not served", env.Config, &kservev1beta1.InferenceService{}, "install the CRDs"}, // this suite's apiserver has no KServe CRDs
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := cache.New(tc.cfg, cache.Options{Scheme: manager.Scheme()})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			go func() { _ = c.Start(ctx) }()
			gate := ondemand.Controller{Kind: "Thing", Object: tc.obj, Cache: c, Log: logr.Discard(), NotServed: "install the CRDs", SyncTimeout: 3 * time.Second,
				Setup: func() error {
					t.Error("the controller was set up by a watch that could not fill")
					return nil
				}}
			if err := gate.Start(ctx); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// setups records the kinds whose controllers the manager's log says were set up.
type setups struct {
	mu  sync.Mutex
	set []string
}

func (s *setups) record(_, args string) {
	if !strings.Contains(args, "setting up the controller of a kind at its first object") {
		return
	}
	_, kind, _ := strings.Cut(args, `"kind"="`)
	kind, _, _ = strings.Cut(kind, `"`)
	s.mu.Lock()
	s.set = append(s.set, kind)
	s.mu.Unlock()
}

func (s *setups) kinds() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.set...)
}

func (s *setups) has(kind string) bool { return slices.Contains(s.kinds(), kind) }
