package trainingjob

import (
	"context"
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

// stays checks, for testenv.Quiet, that the object the test made keeps its resourceVersion
// (nothing wrote it) and has no owner (nothing adopted it).
func stays(t *testing.T, obj client.Object) {
	t.Helper()
	rv := obj.GetResourceVersion()
	testenv.Consistently(t, func() error {
		fresh := obj.DeepCopyObject().(client.Object)
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), fresh); err != nil {
			return fmt.Errorf("%T %s is gone: %v", obj, obj.GetName(), err)
		}
		if fresh.GetResourceVersion() != rv || len(fresh.GetOwnerReferences()) > 0 {
			return fmt.Errorf("%T %s was written (resourceVersion %s → %s, owners %v)", obj, obj.GetName(), rv, fresh.GetResourceVersion(), fresh.GetOwnerReferences())
		}
		return nil
	})
}

// A non-elastic PyTorchJob leaves alone an HPA that shares its name (it used to delete it on its
// first reconcile: the engine deleted the unwanted elastic HPA by name).
func TestPyTorchJobLeavesAnHPAItDoesNotOwn(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To[int32](1), MaxReplicas: 3,
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}}}
	if err := env.Client.Create(context.Background(), hpa); err != nil {
		t.Fatal(err)
	}
	job := create(t, builder.PyTorchJob("web", ns).Replicas("Master", 1).Obj())
	waitPods(t, job, 1)
	stays(t, hpa)
}

// An MPIJob whose hostfile ConfigMap's name is taken by an object it does not control neither
// overwrites nor adopts it (it used to force-apply over it, owning it, so the garbage collector
// deleted it with the job); its pods, which would mount that ConfigMap, wait, and Created says why.
func TestMPIJobDoesNotTakeOverAConfigMap(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pi-config", Namespace: ns}, Data: map[string]string{"hostfile": "mine"}}
	if err := env.Client.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	job := create(t, builder.MPIJob("pi", ns).Replicas("Launcher", 1).Replicas("Worker", 1).Obj())
	createdSays(t, job, "ConfigMap pi-config already exists and belongs to nothing kiln made, not to MPIJob pi")
	stays(t, cm)
	if pods := jobPods(t, job); len(pods) != 0 {
		t.Errorf("%d pods created around a hostfile that is not the job's", len(pods))
	}
	// Once the ConfigMap is gone, the job makes its own and runs.
	if err := env.Client.Delete(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyWithin(t, 2*testenv.Timeout, func() error { return testenv.Count("pods of pi", len(jobPods(t, job)), 2) })
}

// kiln.dev/network-policy: none deletes only the job's own NetworkPolicy: one of that name it
// does not control (a user's, an InferenceService's) stays.
func TestNetworkPolicyNoneLeavesAPolicyItDoesNotOwn(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "open-network-policy", Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	if err := env.Client.Create(context.Background(), np); err != nil {
		t.Fatal(err)
	}
	job := create(t, builder.TFJob("open", ns).Replicas("Worker", 1).Edit(func(j framework.Job) {
		j.SetAnnotations(map[string]string{"kiln.dev/network-policy": "none"})
	}).Obj())
	waitPods(t, job, 1)
	stays(t, np)
}

// A job held by an object in the way of its extras runs once it no longer needs that object: here
// its isolation is dropped while a user's NetworkPolicy holds the name; the job's pods come.
func TestAHoldEndsWhenTheExtraIsNoLongerWanted(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "fenced-network-policy", Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	if err := env.Client.Create(context.Background(), np); err != nil {
		t.Fatal(err)
	}
	job := create(t, builder.TFJob("fenced", ns).Replicas("Worker", 1).Edit(func(j framework.Job) {
		j.SetAnnotations(map[string]string{"kiln.dev/network-policy": "isolated"})
	}).Obj())
	createdSays(t, job, "NetworkPolicy fenced-network-policy already exists")
	if pods := jobPods(t, job); len(pods) != 0 {
		t.Fatalf("%d pods created while the job's NetworkPolicy is someone else's", len(pods))
	}
	update(t, job, func(j framework.Job) { j.SetAnnotations(nil) })
	waitPods(t, job, 1)
	stays(t, np)
}

// A pod of a replica's name that is not the job's is left alone, and the job says whose it is.
func TestAPodOfAReplicasNameIsNotTheJobs(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "taken-worker-0", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if err := env.Client.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	job := create(t, builder.TFJob("taken", ns).Replicas("Worker", 1).Obj())
	createdSays(t, job, "Pod taken-worker-0 already exists and belongs to nothing kiln made, not to TFJob taken")
	env.AwaitEvent(t, ns, "taken", corev1.EventTypeWarning, "FailedCreatePod")
	stays(t, pod)
}

// createdSays waits until the job's Created condition says what.
func createdSays(t *testing.T, job framework.Job, what string) {
	t.Helper()
	testenv.Eventually(t, func() error {
		c := getCondition(get(t, job), kubeflowv1.JobCreated)
		if c == nil || !strings.Contains(c.Message, what) {
			return fmt.Errorf("Created condition %+v, want it to say %q", c, what)
		}
		return nil
	})
}

func getCondition(job framework.Job, ct kubeflowv1.JobConditionType) *kubeflowv1.JobCondition {
	for i, c := range job.GetJobStatus().Conditions {
		if c.Type == ct {
			return &job.GetJobStatus().Conditions[i]
		}
	}
	return nil
}

// A PyJob whose batch Job the apiserver refuses (here an admission policy denying Jobs in its
// namespace) says so in its status, naming the object and the apiserver's words, and in a Warning
// event; it used to return the error before any status was written.
func TestPyJobSaysWhenItsBatchJobIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "no-jobs-in-" + ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}}}}}},
			Validations: []admissionregistrationv1.Validation{{Expression: fmt.Sprintf("object.metadata.namespace != %q", ns), Message: "no Jobs here"}},
		}}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}}
	for _, o := range []client.Object{policy, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(ctx, o) })
	}
	testenv.Eventually(t, func() error { // the policy is in force
		probe := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Namespace: ns}, Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}
		if err := env.Client.Create(ctx, probe, client.DryRunAll); err == nil {
			return fmt.Errorf("a Job is still admitted")
		}
		return nil
	})
	p := &trainingv1alpha1.PyJob{ObjectMeta: metav1.ObjectMeta{Name: "quota", Namespace: ns},
		Spec: trainingv1alpha1.PyJobSpec{Image: "pytorch/pytorch:2.0", Command: []string{"python", "train.py"}, DatasetPath: "/mnt/dataset", OutputPath: "/mnt/output"}}
	if err := env.Client.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		if p.Status.Phase != trainingv1alpha1.PyJobPending || !strings.Contains(p.Status.Message, "Job quota of PyJob quota") || !strings.Contains(p.Status.Message, "no Jobs here") {
			return fmt.Errorf("phase %q message %q, want Pending naming the refused Job", p.Status.Phase, p.Status.Message)
		}
		return nil
	})
	env.AwaitEvent(t, ns, "quota", corev1.EventTypeWarning, "Refused")
}

// A replica whose pod succeeded is never run again: when that pod goes before the job ends (pod
// GC, a node removed, a deletion by hand), the index stays completed in replicaStatuses and gets
// no new pod, and the job still succeeds. (It used to get a new pod: the training ran again.)
func TestFinishedReplicasDoNotRunAgain(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	job := create(t, builder.JAXJob("once", ns).Replicas("Worker", 2).Obj())
	pods := waitPods(t, job, 2)
	runAll(t, pods)
	env.Exit(t, &pods[1], 0)
	testenv.Eventually(t, func() error {
		rs := get(t, job).GetJobStatus().ReplicaStatuses["Worker"]
		if rs == nil || rs.CompletedIndexes != "1" {
			return fmt.Errorf("Worker status %+v, want index 1 completed", rs)
		}
		return nil
	})
	if err := env.Client.Delete(context.Background(), &pods[1]); err != nil {
		t.Fatal(err)
	}
	testenv.Consistently(t, func() error {
		for _, p := range jobPods(t, job) {
			if p.Name == "once-worker-1" {
				return fmt.Errorf("the finished replica runs again: pod %s (uid %s)", p.Name, p.UID)
			}
		}
		return nil
	})
	env.Exit(t, env.Pod(t, ns, "once-worker-0"), 0)
	done := waitCondition(t, job, kubeflowv1.JobSucceeded)
	if rs := done.GetJobStatus().ReplicaStatuses["Worker"]; rs.Succeeded != 2 || rs.CompletedIndexes != "0,1" {
		t.Errorf("Worker status %+v, want 2 succeeded, indexes 0,1", rs)
	}
}

// A PyJob whose batch Job started and vanished before kiln recorded how it ended (kiln down
// meanwhile, a TTL of 0 set by a policy) gets no new batch Job: with no pod left to tell the
// verdict, it fails saying so. (It used to get a new batch Job: the training ran again.)
func TestAPyJobWhoseRunVanishedIsNotRunAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := env.Namespace(t)
	p := builder.PyJob("vanished", ns)
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(p)
	bj := &batchv1.Job{}
	testenv.Eventually(t, func() error { // the batch Job controller starts it
		if err := env.Client.Get(ctx, key, bj); err != nil {
			return err
		}
		start := metav1.Now()
		bj.Status.StartTime, bj.Status.Active = &start, 1
		return env.Client.Status().Update(ctx, bj)
	})
	testenv.Eventually(t, func() error {
		if err := env.Client.Get(ctx, key, p); err != nil {
			return err
		}
		if p.Status.StartTime == nil {
			return fmt.Errorf("no startTime in the PyJob's status yet")
		}
		return nil
	})
	uid := bj.UID
	if err := env.Client.Delete(ctx, bj, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	done := waitPyJobPhase(t, key, trainingv1alpha1.PyJobFailed)
	if !strings.Contains(done.Status.Message, "kiln does not run it again") {
		t.Errorf("message %q, want one saying the run is not started again", done.Status.Message)
	}
	testenv.Consistently(t, func() error {
		again := &batchv1.Job{}
		if err := env.Client.Get(ctx, key, again); err == nil && again.UID != uid {
			return fmt.Errorf("a new batch Job %s runs the training again", again.UID)
		}
		return nil
	})
}

// An extra deleted while its job runs is made again: the engine watches its extras (here MPI's
// hostfile ConfigMap, which the launcher reads). It used to stay deleted.
func TestADeletedHostfileComesBack(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	job := create(t, builder.MPIJob("hosts", ns).Replicas("Launcher", 1).Replicas("Worker", 1).Obj())
	waitPods(t, job, 2)
	cm := &corev1.ConfigMap{}
	env.Await(t, ns, "hosts-config", cm)
	if err := env.Client.Delete(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, func() error {
		fresh := &corev1.ConfigMap{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(cm), fresh); err != nil {
			return err
		}
		if fresh.UID == cm.UID || fresh.Data["hostfile"] == "" || !metav1.IsControlledBy(fresh, job) {
			return fmt.Errorf("ConfigMap hosts-config uid %s (deleted %s), hostfile %q, owners %v", fresh.UID, cm.UID, fresh.Data["hostfile"], fresh.OwnerReferences)
		}
		return nil
	})
}
