// Package metrics scrapes kiln's /metrics after job lifecycles and across a manager restart.
package metrics

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env, nil)) }

// scrape reads /metrics and returns the value of every sample, keyed like
// `name{label="value",…}` with the labels sorted (histograms by their _count).
func scrape(addr string) (map[string]float64, error) {
	families, err := testenv.Metrics(addr)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for name, f := range families {
		for _, m := range f.Metric {
			key := name + labelsOf(m)
			switch {
			case m.Counter != nil:
				out[key] = m.Counter.GetValue()
			case m.Histogram != nil:
				out[name+"_count"+labelsOf(m)] = float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return out, nil
}

func labelsOf(m *dto.Metric) string {
	var l []string
	for _, p := range m.Label {
		l = append(l, fmt.Sprintf("%s=%q", p.GetName(), p.GetValue()))
	}
	return "{" + strings.Join(l, ",") + "}"
}

func waitFor(t *testing.T, job framework.Job, ct kubeflowv1.JobConditionType) {
	t.Helper()
	env.WaitCondition(t, job, ct, testenv.Timeout)
}

func TestMetricsMoveExactlyOnceAndSurviveARestart(t *testing.T) {
	ns := env.Namespace(t)
	addr := testenv.FreeAddr(t)
	opts := testenv.ManagerOptions()
	opts.MetricsAddr = addr
	stop, err := env.StartManager(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { stop() }()

	// One job succeeds; one restarts a worker once (exit 137 under ExitCode), then fails (exit 1).
	ok := builder.TFJob("ok", ns).Replicas("Worker", 2).Obj()
	bad := builder.TFJob("bad", ns).Replicas("Worker", 1).RestartPolicy("Worker", kubeflowv1.RestartPolicyExitCode).Obj()
	for _, j := range []framework.Job{ok, bad} {
		if err := env.Client.Create(context.Background(), j); err != nil {
			t.Fatal(err)
		}
	}
	var pods []corev1.Pod
	testenv.Eventually(t, func() error {
		pods = env.Pods(t, ns, nil)
		return testenv.Count("pods", len(pods), 3)
	})
	for i := range pods {
		env.Run(t, &pods[i])
	}
	waitFor(t, ok, kubeflowv1.JobRunning)
	waitFor(t, bad, kubeflowv1.JobRunning)
	var badUID string
	for i := range pods {
		switch pods[i].Name {
		case "ok-worker-0":
			env.Exit(t, &pods[i], 0)
		case "bad-worker-0":
			badUID = string(pods[i].UID)
			env.Exit(t, &pods[i], 137)
		}
	}
	waitFor(t, ok, kubeflowv1.JobSucceeded)
	waitFor(t, bad, kubeflowv1.JobRestarting)
	testenv.Eventually(t, func() error {
		for _, p := range env.Pods(t, ns, map[string]string{kubeflowv1.LabelJobName: "bad"}) {
			if string(p.UID) != badUID && p.DeletionTimestamp == nil {
				env.Exit(t, &p, 1)
				return nil
			}
		}
		return fmt.Errorf("bad-worker-0 not recreated yet")
	})
	waitFor(t, bad, kubeflowv1.JobFailed)

	l := fmt.Sprintf(`{framework="tensorflow",job_namespace=%q}`, ns)
	want := map[string]float64{
		"training_operator_jobs_created_total" + l:                                    2,
		"training_operator_jobs_successful_total" + l:                                 1,
		"training_operator_jobs_failed_total" + l:                                     1,
		"training_operator_jobs_restarted_total" + l:                                  1,
		`kiln_job_time_to_running_seconds_count{framework="tensorflow"}`:              2,
		`kiln_job_duration_seconds_count{framework="tensorflow",outcome="succeeded"}`: 1,
		`kiln_job_duration_seconds_count{framework="tensorflow",outcome="failed"}`:    1,
	}
	matches := func() error {
		got, err := scrape(addr)
		if err != nil {
			return err
		}
		for k, v := range want {
			if got[k] != v {
				return fmt.Errorf("%s = %v, want %v", k, got[k], v)
			}
		}
		return nil
	}
	testenv.Eventually(t, matches)

	// A restarted manager (same process, same registry) reconciles the finished jobs again and
	// must count nothing twice.
	stop()
	stop = nil
	stop, err = env.StartManager(opts)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, matches) // the new metrics server is up
	testenv.Consistently(t, matches)
}
