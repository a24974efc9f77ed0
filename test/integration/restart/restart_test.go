// Package restart checks that kiln never creates two pods for one replica index and loses no job
// when its manager stops and starts again in the middle of a burst of jobs, and that a manager
// that cannot start says why.
package restart

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env, nil)) }

const jobs = 50

// TestManagerRestartMidBurst creates 50 jobs of every kind at once, stops the manager while it is
// creating their pods, starts a new one, and checks that every replica index ends with exactly
// one pod (no pod was ever created twice: a second pod would carry another UID) and every job
// reaches the condition its pods lead to.
func TestManagerRestartMidBurst(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	stop, err := env.StartManager(testenv.ManagerOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if stop != nil {
			stop()
		}
	}()

	var all []framework.Job
	for i := range jobs {
		var job framework.Job
		switch i % 3 {
		case 0:
			job = builder.TFJob(fmt.Sprintf("tf-%d", i), ns).Replicas("PS", 1).Replicas("Worker", 4).Obj()
		case 1:
			job = builder.PyTorchJob(fmt.Sprintf("pt-%d", i), ns).Replicas("Master", 1).Replicas("Worker", 3).Obj()
		case 2:
			job = builder.XGBoostJob(fmt.Sprintf("xgb-%d", i), ns).Replicas("Master", 1).Replicas("Worker", 2).Obj()
		}
		all = append(all, job)
	}
	errs := make(chan error, len(all))
	for _, job := range all {
		go func() { errs <- env.Client.Create(ctx, job) }()
	}
	for range all {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}

	// Stop the manager once some, but not all, pods exist.
	testenv.Eventually(t, func() error {
		if n := len(env.Pods(t, ns, nil)); n < 20 {
			return fmt.Errorf("only %d pods so far", n)
		}
		return nil
	})
	stop()
	t.Logf("manager stopped with %d pods created", len(env.Pods(t, ns, nil)))
	stop = nil
	stop, err = env.StartManager(testenv.ManagerOptions())
	if err != nil {
		t.Fatal(err)
	}

	want := 0
	for _, job := range all {
		want += int(framework.TotalReplicas(job.GetReplicaSpecs()))
	}
	uids := env.NewPodUIDs(ns)
	uids.WaitFor(t, want)

	// Play the kubelet: every pod runs, then every pod completes.
	pods := env.Pods(t, ns, nil)
	for i := range pods {
		env.Run(t, &pods[i])
	}
	for _, job := range all {
		waitCondition(t, job, kubeflowv1.JobRunning)
	}
	for i := range pods {
		env.Exit(t, &pods[i], 0)
	}
	for _, job := range all {
		waitCondition(t, job, kubeflowv1.JobSucceeded)
	}
	uids.Unchanged(t)
}

func waitCondition(t *testing.T, job framework.Job, ct kubeflowv1.JobConditionType) {
	t.Helper()
	env.WaitCondition(t, job, ct, time.Minute)
}
