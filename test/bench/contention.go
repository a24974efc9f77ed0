package main

// What a run costs the apiserver's other clients (docs/performance.md, "While kiln works"): kiln
// runs as its install's ServiceAccount, so that API Priority and Fairness treats it as in a
// cluster; the apiserver's latency per verb and resource, and its requests in flight over the run.

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	authenticationv1 "k8s.io/api/authentication/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kiln-ml/kiln/internal/devcluster"
	"github.com/kiln-ml/kiln/internal/release"
	"github.com/kiln-ml/kiln/test/testenv"
)

// Identities kiln's manager runs as in a benchmark.
const (
	// identityServiceAccount: the install's ServiceAccount with the install's RBAC, as in a
	// cluster (API Priority and Fairness: the service-accounts flow schema, or the install's own).
	identityServiceAccount = "serviceaccount"
	// identityAdmin: the cluster's admin (system:masters), whom API Priority and Fairness exempts.
	identityAdmin = "admin"
)

// kubeconfigAs is the kubeconfig kiln's manager runs with on cluster as identity: the cluster's
// own for the admin; for the ServiceAccount, the install's RBAC objects are created and a token
// of its ServiceAccount written into a kubeconfig in dir.
// With shares above 0, the ServiceAccount's requests go to a priority level of their own with
// that many nominal concurrency shares (ownPriorityLevel).
func kubeconfigAs(ctx context.Context, cluster *devcluster.Cluster, dir, identity string, shares int32) (string, error) {
	switch identity {
	case identityAdmin:
		return cluster.Kubeconfig, nil
	case identityServiceAccount:
	default:
		return "", fmt.Errorf("IDENTITY=%q: use %s or %s", identity, identityServiceAccount, identityAdmin)
	}
	manifest, err := release.InstallManifest(testenv.RepoRoot(), "v0.0.0-bench")
	if err != nil {
		return "", err
	}
	objs, err := release.Objects(manifest)
	if err != nil {
		return "", err
	}
	var sa *unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
			"FlowSchema", "PriorityLevelConfiguration":
		default:
			continue
		}
		if err := cluster.Client.Create(ctx, o); client.IgnoreAlreadyExists(err) != nil {
			return "", fmt.Errorf("creating the install's %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		if o.GetKind() == "ServiceAccount" {
			sa = o
		}
	}
	if sa == nil {
		return "", fmt.Errorf("the install manifest has no ServiceAccount")
	}
	if shares > 0 {
		if err := ownPriorityLevel(ctx, cluster.Client, sa.GetNamespace(), sa.GetName(), shares); err != nil {
			return "", err
		}
	}
	kube, err := kubernetes.NewForConfig(cluster.Config)
	if err != nil {
		return "", err
	}
	token, err := kube.CoreV1().ServiceAccounts(sa.GetNamespace()).CreateToken(ctx, sa.GetName(),
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("a token of ServiceAccount %s/%s: %w", sa.GetNamespace(), sa.GetName(), err)
	}
	admin, err := clientcmd.LoadFromFile(cluster.Kubeconfig)
	if err != nil {
		return "", err
	}
	ctxName := admin.CurrentContext
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["bench"] = admin.Clusters[admin.Contexts[ctxName].Cluster]
	cfg.AuthInfos[sa.GetName()] = &clientcmdapi.AuthInfo{Token: token.Status.Token}
	cfg.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: sa.GetName()}
	cfg.CurrentContext = "bench"
	path := filepath.Join(dir, "kiln-serviceaccount.kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}

// ownPriorityLevel puts the requests of ServiceAccount ns/name in a priority level of their own
// with shares nominal concurrency shares (global-default has 20, workload-low 100), queued, not
// lending or borrowing seats: a candidate for kiln's install (KILN_SHARES).
func ownPriorityLevel(ctx context.Context, c client.Client, ns, name string, shares int32) error {
	level := &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "kiln-bench"},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: ptr.To(shares),
				LendablePercent: ptr.To[int32](0), BorrowingLimitPercent: ptr.To[int32](0),
				LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue,
					Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 16, HandSize: 4, QueueLengthLimit: 500}}}},
	}
	schema := &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: "kiln-bench"},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: level.Name},
			MatchingPrecedence:         1000,
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindServiceAccount,
					ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: ns, Name: name}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"},
					Resources: []string{"*"}, ClusterScope: true, Namespaces: []string{"*"}}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
			}},
		},
	}
	for _, o := range []client.Object{level, schema} {
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

// benchUser is who submits the jobs: a user, not the cluster's admin, so that API Priority and
// Fairness serves the submissions as a user's (the global-default level), not as exempt.
const benchUser = "bench-user"

// userClient is a client of the cluster that acts as benchUser, who may do anything in the
// benchmark's namespace (the admin client c grants it).
func userClient(ctx context.Context, cluster *devcluster.Cluster, c client.Client) (client.Client, error) {
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: benchUser, Namespace: benchNamespace},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: benchUser}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
	}
	if err := c.Create(ctx, rb); err != nil {
		return nil, fmt.Errorf("letting %s submit: %w", benchUser, err)
	}
	cfg := rest.CopyConfig(cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: benchUser, Groups: []string{"system:authenticated"}}
	return client.New(cfg, client.Options{Scheme: c.Scheme()})
}

// Latency is a request's latency in seconds, by percentile, and how many were served.
type Latency struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50"`
	P99   float64 `json:"p99"`
}

// histograms are the apiserver's request duration histograms by "VERB resource" (long-running
// requests left out): cumulative counts by upper bound.
type histograms map[string]map[float64]uint64

func requestHistograms(families map[string]*dto.MetricFamily) histograms {
	out := histograms{}
	for _, m := range families["apiserver_request_duration_seconds"].GetMetric() {
		verb := testenv.Label(m, "verb")
		if verb == "WATCH" || verb == "CONNECT" {
			continue
		}
		key := verb + " " + testenv.Label(m, "resource")
		if sub := testenv.Label(m, "subresource"); sub != "" {
			key += "/" + sub
		}
		h := out[key]
		if h == nil {
			h = map[float64]uint64{}
			out[key] = h
		}
		for _, b := range m.GetHistogram().GetBucket() {
			if !math.IsInf(b.GetUpperBound(), 1) { // the text format lists +Inf too: it is the count
				h[b.GetUpperBound()] += b.GetCumulativeCount()
			}
		}
		h[math.Inf(1)] += m.GetHistogram().GetSampleCount()
	}
	return out
}

// latencies are the percentiles of the requests served between before and after, from the
// histograms' buckets (a percentile is its bucket's upper bound).
func latencies(after, before histograms) map[string]Latency {
	out := map[string]Latency{}
	for key, h := range after {
		bounds := slices.Sorted(func(yield func(float64) bool) {
			for b := range h {
				if !yield(b) {
					return
				}
			}
		})
		total := h[math.Inf(1)] - before[key][math.Inf(1)]
		if total == 0 {
			continue
		}
		// Above the largest bound (60 s) is reported as that bound: JSON has no infinity.
		at := func(q float64) float64 {
			for i, b := range bounds {
				if float64(h[b]-before[key][b]) >= q*float64(total) {
					if math.IsInf(b, 1) && i > 0 {
						return bounds[i-1]
					}
					return b
				}
			}
			return bounds[len(bounds)-1]
		}
		out[key] = Latency{Count: int(total), P50: at(0.5), P99: at(0.99)}
	}
	return out
}

// LoadPoint is the apiserver's load at T seconds: its requests in flight, mutating and read-only,
// and the requests each API Priority and Fairness level executes.
type LoadPoint struct {
	T         float64            `json:"t"`
	Executing map[string]float64 `json:"executingByPriorityLevel"`
	InFlight  map[string]float64 `json:"inFlight"`
}

// loadSampler reads the apiserver's metrics every second from t0 until stopped.
type loadSampler struct {
	mu     sync.Mutex
	points []LoadPoint
	stop   func()
	done   chan struct{}
}

func sampleLoad(ctx context.Context, kube kubernetes.Interface, t0 time.Time) *loadSampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &loadSampler{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			if families, err := apiserverMetrics(ctx, kube); err == nil {
				p := LoadPoint{T: time.Since(t0).Seconds(), Executing: map[string]float64{}, InFlight: map[string]float64{}}
				for _, m := range families["apiserver_current_inflight_requests"].GetMetric() {
					p.InFlight[testenv.Label(m, "request_kind")] = m.GetGauge().GetValue()
				}
				for _, m := range families["apiserver_flowcontrol_current_executing_requests"].GetMetric() {
					p.Executing[testenv.Label(m, "priority_level")] += m.GetGauge().GetValue()
				}
				s.mu.Lock()
				s.points = append(s.points, p)
				s.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// finish stops sampling and returns the points.
func (s *loadSampler) finish() []LoadPoint {
	s.stop()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.points
}

// peakAndMean are the largest and the mean value of what get reads from points.
func peakAndMean(points []LoadPoint, get func(LoadPoint) float64) (peak, mean float64) {
	for _, p := range points {
		v := get(p)
		peak = max(peak, v)
		mean += v
	}
	if len(points) > 0 {
		mean /= float64(len(points))
	}
	return peak, mean
}

func apiserverMetrics(ctx context.Context, kube kubernetes.Interface) (map[string]*dto.MetricFamily, error) {
	body, err := kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the apiserver's metrics: %w", err)
	}
	return testenv.ParseMetrics(bytes.NewReader(body))
}

// topLatencies are the n request kinds with the most requests, as "VERB resource p50/p99 ms (count)".
func topLatencies(l map[string]Latency, n int) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if l[keys[i]].Count != l[keys[j]].Count {
			return l[keys[i]].Count > l[keys[j]].Count
		}
		return keys[i] < keys[j]
	})
	var parts []string
	for _, k := range keys[:min(n, len(keys))] {
		parts = append(parts, fmt.Sprintf("%s %s/%s ms (%d)", k, ms(l[k].P50), ms(l[k].P99), l[k].Count))
	}
	return joinOr(parts)
}

func ms(s float64) string { return fmt.Sprintf("%.0f", s*1000) }

// joinOr joins parts with "; ", or is "–" for none.
func joinOr(parts []string) string {
	if len(parts) == 0 {
		return "–"
	}
	return strings.Join(parts, "; ")
}
