package trainingjob

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/burst"
	"github.com/kiln-ml/kiln/internal/framework"
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

// While a burst goes on, the jobs that arrived in it have neither pods nor Created: kiln writes
// nothing for them (each write slowed the submitter); once it is in, every job has both.
// A burst ends once no job arrived within a Window. On a loaded machine kiln or the apiserver can
// stall that long, and kiln rightly lets the jobs it held go (kiln_burst_hold_seconds counts
// them): such a try says nothing, and the test submits another burst, three at most.
func TestNothingIsWrittenForAJobWhileItsBurstGoesOn(t *testing.T) {
	for try := 1; ; try++ {
		jobs, wrote, ended := burstWhileChecking(t)
		// Every job gets both once the burst is in; and the next try counts only its own releases.
		for _, j := range jobs {
			waitPods(t, j, 1)
			waitCondition(t, j, kubeflowv1.JobCreated)
		}
		if len(wrote) == 0 {
			break
		}
		if !ended || try == 3 {
			for _, w := range wrote {
				t.Error(w)
			}
			if ended {
				t.Error("in each of three tries kiln saw a burst end before the check (kiln_burst_hold_seconds)")
			}
			break
		}
		t.Logf("try %d: kiln saw the burst end before the check, so the %d writes found prove nothing; trying again", try, len(wrote))
	}
}

// burstWhileChecking submits jobs into a new namespace in a burst and, a second and a half into
// it, says what kiln wrote for the jobs that arrived once it was one (pods, conditions), and
// whether kiln let held jobs go meanwhile (ended: it saw a burst end). jobs are all it created.
func burstWhileChecking(t *testing.T) (jobs []framework.Job, wrote []string, ended bool) {
	ns := env.Namespace(t)
	waitPods(t, create(t, builder.TFJob("before", ns).Replicas("Worker", 1).Obj()), 1)
	held := heldJobs(t)
	// Eight submitters, each a create every 50 ms: above burst.Rate a second even when each create
	// takes half a second.
	ctx, stop := context.WithCancel(context.Background())
	var (
		mu   sync.Mutex
		made []framework.Job
		wg   sync.WaitGroup
	)
	for s := range 8 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				j := builder.TFJob(fmt.Sprintf("s%d-%d", s, i), ns).Replicas("Worker", 1).Obj()
				if err := env.Client.Create(context.Background(), j); err != nil {
					t.Errorf("creating a job of the burst: %v", err)
					return
				}
				mu.Lock()
				made = append(made, j)
				mu.Unlock()
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
	defer func() { stop(); wg.Wait(); jobs = made }()
	// A second and a half into the burst, the jobs that arrived once it was one (all but the
	// first Rate-1; twice that, to be sure), most of them seen by kiln long since, have nothing.
	time.Sleep(1500 * time.Millisecond)
	mu.Lock()
	arrived := append([]framework.Job(nil), made[2*burst.Rate:]...)
	mu.Unlock()
	if len(arrived) < burst.Rate {
		t.Fatalf("only %d jobs created in 1.5 s: not a burst", len(arrived)+2*burst.Rate)
	}
	// Read at once (two lists), while the burst goes on.
	var all kubeflowv1.TFJobList
	if err := env.Client.List(context.Background(), &all, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var pods corev1.PodList
	if err := env.Client.List(context.Background(), &pods, client.InNamespace(ns), client.HasLabels{kubeflowv1.LabelJobName}); err != nil {
		t.Fatal(err)
	}
	conditions := map[string][]kubeflowv1.JobCondition{}
	for _, j := range all.Items {
		conditions[j.Name] = j.Status.Conditions
	}
	podsOf := map[string]int{}
	for _, p := range pods.Items {
		podsOf[p.Labels[kubeflowv1.LabelJobName]]++
	}
	for _, j := range arrived {
		if c := conditions[j.GetName()]; len(c) > 0 {
			wrote = append(wrote, fmt.Sprintf("job %s has conditions %v while the burst it arrived in goes on", j.GetName(), c))
		}
		if n := podsOf[j.GetName()]; n > 0 {
			wrote = append(wrote, fmt.Sprintf("job %s has %d pods while the burst it arrived in goes on", j.GetName(), n))
		}
	}
	// Read after the jobs: a burst that ended while they were read let some go too. jobs is set
	// by the deferred function, once the submitters have stopped.
	return nil, wrote, heldJobs(t) != held
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
	held := heldJobs(t)
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
	if heldJobs(t) == held {
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
func heldJobs(t *testing.T) float64 {
	return testenv.MetricValue(t, "kiln_burst_hold_seconds", nil)
}
