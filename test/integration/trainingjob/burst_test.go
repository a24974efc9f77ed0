package trainingjob

import (
	"context"
	"fmt"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/burst"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/metrics"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

// Jobs submitted into a namespace in a burst: kiln holds the pods and the Created condition of
// those that arrive while it goes on (the metric counts them), and every job has both once the
// burst is in.
// Not parallel: the metric is the process's, and the bursts run before the parallel tests do.
func TestJobsSubmittedInABurstGetTheirPodsOnceItIsIn(t *testing.T) {
	ns := env.Namespace(t)
	// kiln runs: a job created while its informers start is one it found, not one that arrived.
	waitPods(t, create(t, builder.TFJob("before", ns).Replicas("Worker", 1).Obj()), 1)
	jobs := make([]client.Object, 4*burst.Rate)
	for i := range jobs {
		jobs[i] = builder.TFJob(fmt.Sprintf("burst-%d", i), ns).Replicas("Worker", 1).Obj()
	}
	submitInABurst(t, jobs, func() {
		for _, j := range jobs {
			waitPods(t, j.(framework.Job), 1)
			waitCondition(t, j.(framework.Job), kubeflowv1.JobCreated)
		}
	})
}

// The same for PyJobs: each one's batch Job is created once the burst is in.
func TestPyJobsSubmittedInABurstGetTheirJobOnceItIsIn(t *testing.T) {
	ns := env.Namespace(t)
	waitBatchJob(t, createPyJob(t, builder.PyJob("before", ns)))
	jobs := make([]client.Object, 4*burst.Rate)
	for i := range jobs {
		jobs[i] = builder.PyJob(fmt.Sprintf("burst-%d", i), ns)
	}
	submitInABurst(t, jobs, func() {
		for _, j := range jobs {
			waitBatchJob(t, j)
		}
	})
}

// submitInABurst creates jobs all at once, waits with ran until each has what it runs, and checks
// that kiln held some of them for the burst (kiln_burst_hold_seconds).
func submitInABurst(t *testing.T, jobs []client.Object, ran func()) {
	t.Helper()
	held := heldJobs()
	var wg sync.WaitGroup
	errs := make(chan error, len(jobs))
	for _, j := range jobs {
		wg.Go(func() {
			if err := env.Client.Create(context.Background(), j); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("creating a job of the burst: %v", err)
	}
	ran()
	if heldJobs() == held {
		t.Errorf("%d jobs created at once in one namespace: kiln held none of them (kiln_burst_hold_seconds)", len(jobs))
	}
}

func createPyJob(t *testing.T, j client.Object) client.Object {
	t.Helper()
	if err := env.Client.Create(context.Background(), j); err != nil {
		t.Fatalf("creating PyJob %s: %v", j.GetName(), err)
	}
	return j
}

// waitBatchJob waits until the PyJob's batch Job exists.
func waitBatchJob(t *testing.T, j client.Object) {
	t.Helper()
	testenv.Eventually(t, func() error {
		return env.Client.Get(context.Background(), client.ObjectKeyFromObject(j), &batchv1.Job{})
	})
}

// heldJobs is how many jobs kiln has held for a burst so far, in this process.
func heldJobs() uint64 {
	var m dto.Metric
	_ = metrics.BurstHold.Write(&m)
	return m.GetHistogram().GetSampleCount()
}
