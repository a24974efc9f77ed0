package restart

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

// leaseDuration and retryPeriod are controller-runtime's defaults, which kiln keeps. A killed
// leader does not release its lease. The follower, which retries every retryPeriod stretched by
// up to client-go's JitterFactor, may see the leader's last renewal one retry late; the lease
// expires leaseDuration after it saw it, and the follower takes it at its next retry. So the
// takeover comes at most leaseDuration and two jittered retries after the kill.
const (
	leaseDuration = 15 * time.Second
	retryPeriod   = 2 * time.Second
	maxTakeover   = leaseDuration + 2*time.Duration((1+leaderelection.JitterFactor)*float64(retryPeriod))
)

// replica is one `kiln manager` process; it dies with the test process at the latest.
type replica struct {
	cmd     *exec.Cmd
	metrics string
}

func startReplica(t *testing.T, bin, kubeconfig string, i int) *replica {
	t.Helper()
	addr := testenv.FreeAddr(t)
	logs, err := os.Create(filepath.Join(t.TempDir(), fmt.Sprintf("kiln-%d.log", i)))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "manager", "--webhook-port=0", "--kubeconfig", kubeconfig, "--leader-elect", "--leader-election-namespace", "default",
		"--leader-election-id", "kiln-failover-test", "--metrics-bind-address", addr, "--health-probe-bind-address", "0")
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logs.Close()
	})
	return &replica{cmd: cmd, metrics: addr}
}

// leads reports whether the replica holds the lease, from its leader_election_master_status.
func (r *replica) leads() bool {
	families, err := testenv.Metrics(r.metrics)
	if err != nil {
		return false
	}
	for _, m := range families["leader_election_master_status"].GetMetric() {
		if testenv.Label(m, "name") == "kiln-failover-test" && m.GetGauge().GetValue() == 1 {
			return true
		}
	}
	return false
}

// TestLeaderFailover runs two kiln replicas with leader election, kills the leader (SIGKILL, so
// the lease is not released) while it creates the pods of 20 jobs, and checks that the other
// takes over within the lease duration, that every job finishes, and that no replica index ever
// had two pods.
func TestLeaderFailover(t *testing.T) {
	bin := testenv.BuildKiln(t)
	kubeconfig := env.Kubeconfig(t)
	ns := env.Namespace(t)
	replicas := []*replica{startReplica(t, bin, kubeconfig, 0), startReplica(t, bin, kubeconfig, 1)}
	var leader, follower *replica
	testenv.EventuallyWithin(t, time.Minute, func() error {
		for i, r := range replicas {
			if r.leads() {
				leader, follower = r, replicas[1-i]
				return nil
			}
		}
		return fmt.Errorf("no replica leads yet")
	})

	var jobs []framework.Job
	for i := range 20 {
		j := builder.TFJob(fmt.Sprintf("tf-%d", i), ns).Replicas("PS", 1).Replicas("Worker", 3).Obj()
		if err := env.Client.Create(t.Context(), j); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j)
	}
	testenv.Eventually(t, func() error {
		if n := len(env.Pods(t, ns, nil)); n < 10 {
			return fmt.Errorf("only %d pods so far", n)
		}
		return nil
	})
	killed := time.Now()
	if err := leader.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed the leader (pid %d) with %d pods created", leader.cmd.Process.Pid, len(env.Pods(t, ns, nil)))
	testenv.EventuallyWithin(t, 2*maxTakeover, func() error {
		if !follower.leads() {
			return fmt.Errorf("the follower has not taken over")
		}
		return nil
	})
	if took := time.Since(killed); took > maxTakeover {
		t.Errorf("takeover took %s, want within %s (the lease duration and two jittered retry periods)", took, maxTakeover)
	} else {
		t.Logf("takeover after %s", took.Round(100*time.Millisecond))
	}

	uids := env.NewPodUIDs(ns)
	uids.WaitFor(t, 20*4)
	pods := env.Pods(t, ns, nil)
	for i := range pods {
		env.Run(t, &pods[i])
	}
	for i := range pods {
		if strings.Contains(pods[i].Name, "-worker-") {
			env.Exit(t, &pods[i], 0)
		}
	}
	for _, j := range jobs {
		waitCondition(t, j, kubeflowv1.JobSucceeded)
	}
	uids.Unchanged(t)
}
