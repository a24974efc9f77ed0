package addons

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
	"github.com/kiln-ml/kiln/internal/devcluster"
	"github.com/kiln-ml/kiln/test/testenv"
)

// kedaScaler is the address of the stand-in for the HTTP add-on's scaler; pendingFile holds the
// number of requests it reports waiting (see hack/tools/keda/httpscaler).
var kedaScaler, pendingFile string

// startKEDA installs KEDA's CRDs and the HTTP add-on's InterceptorRoute CRD, and starts KEDA's
// operator (its metrics gRPC service on a local address, with a certificate made here, as its
// chart mounts one) and the stand-in for the add-on's scaler.
func startKEDA(c *testenv.Cluster, dir string) (func(), error) {
	home, err := addonDir(c, "keda", "github.com/kedacore/keda/v2")
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	kedaCRDs, _ := filepath.Glob(filepath.Join(c.Tools, "crds", "keda-*"))
	if len(kedaCRDs) == 0 {
		return nil, fmt.Errorf("no KEDA CRDs in %s: run `bash hack/tools.sh envtest`", c.Tools)
	}
	for _, crds := range []string{kedaCRDs[0], filepath.Join(testenv.RepoRoot(), "test", "testdata", "crds", "http.keda.sh_interceptorroutes.yaml")} {
		if err := devcluster.InstallCRDs(ctx, c.Client, crds); err != nil {
			return nil, err
		}
	}
	if err := c.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "keda"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	certDir := filepath.Join(dir, "keda-certs")
	files, err := devcluster.ServingCert("keda", "keda-operator.keda.svc")
	if err != nil {
		return nil, err
	}
	if err := writeFiles(certDir, files); err != nil {
		return nil, err
	}
	scaler, err := startHTTPScaler(home, dir)
	if err != nil {
		return nil, err
	}
	// Each try on fresh local addresses: a port found free may be taken by another process before
	// the operator binds it (the add-ons and the control plane start at once).
	var tries []string
	for range 3 {
		kedaOperator, err = startKEDAOperator(c, home, dir, certDir)
		if err == nil {
			return func() { kedaOperator.Stop(); scaler.Stop() }, nil
		}
		tries = append(tries, err.Error())
	}
	scaler.Stop()
	return nil, fmt.Errorf("KEDA's operator did not start in 3 tries:\n%s", strings.Join(tries, "\n"))
}

// kedaOperator is the running KEDA operator, whose state the tests report when KEDA does not act.
var kedaOperator *testenv.Process

// startKEDAOperator starts KEDA's operator on fresh local addresses and waits until it is ready
// (its readyz answers), or has exited, or a minute passed.
func startKEDAOperator(c *testenv.Cluster, home, dir, certDir string) (*testenv.Process, error) {
	var addrs [3]string
	for i := range addrs {
		var err error
		if addrs[i], err = devcluster.FreeAddr(); err != nil {
			return nil, err
		}
	}
	operator, err := testenv.StartProcess("keda-operator", dir,
		[]string{"KUBECONFIG=" + c.Kubeconfig, "POD_NAMESPACE=keda", "KEDA_CLUSTER_OBJECT_NAMESPACE=keda", "WATCH_NAMESPACE="},
		filepath.Join(home, "keda-operator"), "--leader-elect=false", "--cert-dir", certDir, "--ca-dir", certDir,
		"--metrics-bind-address", addrs[0], "--health-probe-bind-address", addrs[1], "--metrics-service-bind-address", addrs[2])
	if err != nil {
		return nil, err
	}
	if err := waitServing(operator, "http://"+addrs[1]+"/readyz"); err != nil {
		operator.Stop()
		return nil, err
	}
	return operator, nil
}

// startHTTPScaler starts the stand-in for the HTTP add-on's scaler on a fresh local address
// (kedaScaler), reporting the requests waiting that pendingFile holds, and waits until it
// accepts connections; up to 3 tries, as for KEDA's operator.
func startHTTPScaler(home, dir string) (*testenv.Process, error) {
	scalers, _ := filepath.Glob(filepath.Join(home, "httpscaler-*"))
	if len(scalers) != 1 {
		return nil, fmt.Errorf("no stand-in HTTP add-on scaler in %s: run `bash hack/tools.sh addons`", home)
	}
	pendingFile = filepath.Join(dir, "pending-requests")
	var tries []string
	for range 3 {
		addr, err := devcluster.FreeAddr()
		if err != nil {
			return nil, err
		}
		scaler, err := testenv.StartProcess("httpscaler", dir, nil, scalers[0], "--listen", addr, "--pending-file", pendingFile)
		if err != nil {
			return nil, err
		}
		if err = waitServing(scaler, addr); err == nil {
			kedaScaler = addr
			return scaler, nil
		}
		scaler.Stop()
		tries = append(tries, err.Error())
	}
	return nil, fmt.Errorf("the stand-in HTTP add-on scaler did not start in 3 tries:\n%s", strings.Join(tries, "\n"))
}

// waitServing waits up to a minute until p answers at target (an http:// URL answered with 200,
// or a host:port that accepts connections), failing at once when p exits.
func waitServing(p *testenv.Process, target string) error {
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := p.Exited(); err != nil {
			return false, err
		}
		if !strings.HasPrefix(target, "http://") {
			conn, err := net.DialTimeout("tcp", target, time.Second)
			if last = err; err == nil {
				conn.Close()
			}
			return err == nil, nil
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		resp, err := http.DefaultClient.Do(req)
		if last = err; err != nil {
			return false, nil
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			last = fmt.Errorf("%s answered %s", target, resp.Status)
		}
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("%s did not answer at %s within a minute: %w (last: %v); its log: %s", p.Name, target, err, last, p.Log)
	}
	return nil
}

// operatorState says whether KEDA's operator runs, with the end of its log: what a test that
// waits for KEDA says when KEDA does not act.
func operatorState() string {
	if err := kedaOperator.Exited(); err != nil {
		return err.Error()
	}
	return "KEDA's operator runs; the end of its log (" + kedaOperator.Log + "):\n" + kedaOperator.Tail()
}

func writeFiles(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// An InferenceService with minReplicas 0, beside the real KEDA operator: KEDA accepts the
// ScaledObject kiln makes (Ready) and scales the predictor to zero; the service is Ready with no
// pod only once the add-on reports its InterceptorRoute Ready (done here as the add-on's
// operator would); requests waiting at the interceptor (reported by the stand-in scaler) make
// KEDA scale it up again, and it serves from a running replica.
func TestScaleToZeroAndBackWithKEDA(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	isvc := &servingv1alpha1.InferenceService{ObjectMeta: metav1.ObjectMeta{Name: "sleepy", Namespace: ns},
		Spec: servingv1alpha1.InferenceServiceSpec{ModelURI: "gs://models/iris", Framework: servingv1alpha1.FrameworkSKLearn,
			MinReplicas: ptr.To[int32](0), MaxReplicas: ptr.To[int32](3)}}
	if err := cluster.Client.Create(context.Background(), isvc); err != nil {
		t.Fatal(err)
	}
	object := func(apiVersion, kind, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	condition := func(u *unstructured.Unstructured, ct string) (string, string) {
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if c := c.(map[string]any); c["type"] == ct {
				return fmt.Sprint(c["status"]), fmt.Sprint(c["reason"], ": ", c["message"])
			}
		}
		return "", ""
	}
	so := object("keda.sh/v1alpha1", "ScaledObject", "sleepy-predictor")
	testenv.EventuallyWithin(t, 2*timeout, func() error {
		if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(so), so); err != nil {
			return err
		}
		if status, why := condition(so, "Ready"); status != "True" {
			return fmt.Errorf("KEDA has not accepted the ScaledObject: Ready %q %s; %s", status, why, operatorState())
		}
		return nil
	})
	status := func(check func(*servingv1alpha1.InferenceService) error) *servingv1alpha1.InferenceService {
		t.Helper()
		fresh := &servingv1alpha1.InferenceService{}
		testenv.EventuallyWithin(t, 2*timeout, func() error {
			if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(isvc), fresh); err != nil {
				return err
			}
			if err := check(fresh); err != nil {
				return fmt.Errorf("%w; %s", err, operatorState())
			}
			return nil
		})
		return fresh
	}
	replicas := func() int32 {
		d := &appsv1.Deployment{}
		if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "sleepy-predictor"}, d); err != nil {
			t.Fatal(err)
		}
		return ptr.Deref(d.Spec.Replicas, 1)
	}
	// No request waits: KEDA scales it to zero. Nothing would wake it yet: not Ready.
	status(func(i *servingv1alpha1.InferenceService) error {
		c := meta.FindStatusCondition(i.Status.Conditions, "ScaleToZero")
		if n := replicas(); n != 0 || i.Status.ReadyReplicas != 0 || c == nil || c.Reason != "InterceptorRouteNotReady" || meta.IsStatusConditionTrue(i.Status.Conditions, "Ready") {
			return fmt.Errorf("replicas %d, ready %d, ScaleToZero %+v, Ready %v: want scaled to zero and not Ready", n, i.Status.ReadyReplicas, c, meta.IsStatusConditionTrue(i.Status.Conditions, "Ready"))
		}
		return nil
	})
	route := object("http.keda.sh/v1beta1", "InterceptorRoute", "sleepy")
	testenv.EventuallyWithin(t, timeout, func() error {
		if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(route), route); err != nil {
			return err
		}
		route.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Reconciled",
			"message": "", "lastTransitionTime": metav1.Now().UTC().Format("2006-01-02T15:04:05Z")}}}
		return cluster.Client.Status().Update(context.Background(), route)
	})
	asleep := status(func(i *servingv1alpha1.InferenceService) error {
		if c := meta.FindStatusCondition(i.Status.Conditions, "Ready"); c == nil || c.Status != metav1.ConditionTrue || c.Reason != "ScaledToZero" {
			return fmt.Errorf("Ready %+v, want True: ScaledToZero", c)
		}
		return nil
	})
	t.Logf("scaled to zero, Ready says: %s", meta.FindStatusCondition(asleep.Status.Conditions, "Ready").Message)

	// Requests wait at the interceptor: KEDA scales the predictor up, and it serves.
	if err := os.WriteFile(pendingFile, []byte("5"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(pendingFile) })
	awake := status(func(i *servingv1alpha1.InferenceService) error {
		if c := meta.FindStatusCondition(i.Status.Conditions, "Ready"); i.Status.ReadyReplicas < 1 || c == nil || c.Status != metav1.ConditionTrue || c.Reason != "Ready" {
			return fmt.Errorf("ready replicas %d, Ready %+v: want woken up and serving", i.Status.ReadyReplicas, c)
		}
		return nil
	})
	if !strings.HasSuffix(awake.Status.URL, ":8080") {
		t.Errorf("url %s, want the interceptor's address", awake.Status.URL)
	}
}
