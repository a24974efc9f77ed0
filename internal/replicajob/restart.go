package replicajob

// The restart policy: a failed replica's retry is recorded (on its service, or carried for kinds
// without one) before its pod goes, and the job is Restarting until it runs again.

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
)

// podRestarts is the retry history of a replica of a kind without services: the count its pod
// carries, or, while the pod is gone, the one kept since its deletion; replaced when the replica
// was restarted (its pod, until it runs, is one coming back). A pod never counts its own failure.
func (p *planner) podRestarts(rtype kubeflowv1.ReplicaType, index int, pod *corev1.Pod) (restarts int32, replaced bool) {
	name := p.fw.PodNameOf(p.job, rtype, index)
	if n := p.in.Carried[name]; n > 0 && (pod == nil || pod.DeletionTimestamp != nil) {
		p.carry(name, n) // until the replacement exists
		return n, true
	}
	if pod == nil {
		return 0, false
	}
	n, _ := strconv.Atoi(pod.Annotations[AnnotationRestarts])
	return int32(n), n > 0
}

func (p *planner) carry(name string, n int32) {
	if p.plan.Carried == nil {
		p.plan.Carried = map[string]int32{}
	}
	p.plan.Carried[name] = n
}

func (o *observed) comeBack(rtype kubeflowv1.ReplicaType) {
	if o.comingBack == nil {
		o.comingBack = map[kubeflowv1.ReplicaType]int32{}
	}
	o.comingBack[rtype]++
}

// restart recreates failed pods: their service first records the retry, then the pod goes and a
// later reconcile creates it anew under the same name. A failed pod whose service is missing (it
// is being created, or the apiserver refuses it; the status says so) stays until the service can
// record the retry: deleting it first would forget the failure and retry past backoffLimit.
func (p *planner) restart(retry []failedPod) {
	for _, f := range retry {
		switch {
		case f.svc == nil && p.fw.HasServices(p.job):
			continue
		case !f.counted && f.svc != nil:
			p.plan.MarkRestarts = append(p.plan.MarkRestarts, restartMark{Service: f.svc, Restarts: f.restarts + 1, PodUID: string(f.pod.UID)})
		case !p.fw.HasServices(p.job):
			p.carry(f.pod.Name, f.restarts+1)
		}
		p.deletePod(f.pod)
	}
}
