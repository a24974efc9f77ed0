package replicajob

import (
	"fmt"
	"testing"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework/mpi"
	"github.com/kiln-ml/kiln/internal/gang"
	"github.com/kiln-ml/kiln/internal/netpol"
	"github.com/kiln-ml/kiln/test/builder"
)

// The plan returns every write a reconcile makes: the gang group, the secrets and extras before
// the pods, and nothing for what was already written.
func TestThePlanReturnsEveryWrite(t *testing.T) {
	w := newWorld(mpi.New(mpi.Config{}), builder.MPIJob("pi", "ns").Replicas("Launcher", 1).Replicas("Worker", 2))
	w.plugins = pluginsFor(Options{Gang: gang.Native{}, DefaultNetworkPolicy: netpol.Isolated})
	in := Inputs{Now: now, Group: w.plugins.group(w.fw, w.job)}
	own(w.fw, in.Group, w.job)
	p, err := plan(w.fw, w.plugins, w.job, in)
	if err != nil {
		t.Fatal(err)
	}
	if p.Group == nil || !p.GroupKeep || p.Group.GetName() != "pi-mpijob" || len(p.Group.GetOwnerReferences()) != 1 {
		t.Errorf("group %v (keep %v), want pi-mpijob kept, owned by the job", p.Group, p.GroupKeep)
	}
	if !p.CreateSecrets {
		t.Error("the SSH secret is not planned")
	}
	kinds := map[string]bool{}
	for _, e := range p.Extras {
		kinds[fmt.Sprintf("%T", e.Object)] = e.Wanted
	}
	if !kinds["*v1.ConfigMap"] || !kinds["*v1.NetworkPolicy"] || len(p.Extras) != 2 {
		t.Errorf("extras %v, want the hostfile ConfigMap and the NetworkPolicy, both wanted", kinds)
	}
	if len(p.CreatePods) != 3 {
		t.Fatalf("%d pods planned, want 3", len(p.CreatePods))
	}
	for _, pod := range p.CreatePods {
		if g := pod.Spec.SchedulingGroup; g == nil || g.PodGroupName == nil || *g.PodGroupName != "pi-mpijob" {
			t.Errorf("pod %s does not join the gang's group: %v", pod.Name, g)
		}
	}

	// What this process wrote already is not planned again.
	in.SecretsCreated, in.ExtrasSynced = true, p.ExtrasDigest
	again, err := plan(w.fw, w.plugins, w.job, in)
	if err != nil {
		t.Fatal(err)
	}
	if again.CreateSecrets || again.Extras != nil || again.ExtrasDigest != p.ExtrasDigest {
		t.Errorf("planned again: secrets %v, extras %d", again.CreateSecrets, len(again.Extras))
	}

	// A finished job deletes its group and wants no new secret.
	w.job.GetJobStatus().Conditions = []kubeflowv1.JobCondition{{Type: kubeflowv1.JobSucceeded, Status: "True"}}
	done, err := plan(w.fw, w.plugins, w.job, Inputs{Now: now, Group: in.Group})
	if err != nil {
		t.Fatal(err)
	}
	if done.Group == nil || done.GroupKeep || done.CreateSecrets {
		t.Errorf("finished: group kept %v, secrets %v; want the group deleted and no secret", done.GroupKeep, done.CreateSecrets)
	}
}

// Kueue's plugin says why a suspended job waits when a queue label puts it in a queue, and only then.
func TestPluginsSayWhySuspended(t *testing.T) {
	job := builder.TFJob("j", "ns").Replicas("Worker", 1).Obj()
	job.SetLabels(map[string]string{"kueue.x-k8s.io/queue-name": "q"})
	if got := pluginsFor(Options{}).whySuspended(job); got != "waiting for Kueue to admit it from LocalQueue q" {
		t.Errorf("why suspended: %q", got)
	}
	job.SetLabels(nil)
	if got := pluginsFor(Options{}).whySuspended(job); got != "" {
		t.Errorf("without a queue label: %q", got)
	}
}
