package cli

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	trainerv1alpha1 "github.com/kiln-ml/kiln/api/trainer.kubeflow.org/v1alpha1"
)

// kind is one of kiln's kinds as the command line sees it: where it is served, how its pods are
// found, how many replicas it asks for, and how its status reads.
type kind struct {
	name    string // TFJob
	gvr     schema.GroupVersionResource
	aliases []string // what a user may type besides the lower-case name and the plural
	// podLabel is the label on the kind's pods whose value is the job's name; operator, for
	// Kubeflow's kinds, the value of their operator-name label.
	podLabel, operator string
	// replicaSpecs is the spec field of Kubeflow's replica specs; "" for the other kinds.
	replicaSpecs string
	// suspend is the path of the spec's suspend field; nil when the kind does not suspend.
	suspend []string
	// serving kinds are Ready or not; the others run to an end.
	serving bool
}

var (
	kubeflowV1 = schema.GroupVersion{Group: "kubeflow.org", Version: "v1"}
	runPolicy  = []string{"spec", "runPolicy", "suspend"}
	specFlag   = []string{"spec", "suspend"}
)

// kinds are every kind kiln serves, in the order `get all` lists them.
var kinds = []kind{
	kubeflow("TFJob", "tfjobs", "tfReplicaSpecs", "tfjob"),
	kubeflow("PyTorchJob", "pytorchjobs", "pytorchReplicaSpecs", "ptjob"),
	kubeflow("XGBoostJob", "xgboostjobs", "xgbReplicaSpecs", "xgbjob"),
	kubeflow("JAXJob", "jaxjobs", "jaxReplicaSpecs", "jaxjob"),
	kubeflow("PaddleJob", "paddlejobs", "paddleReplicaSpecs", "paddlejob"),
	kubeflow("MPIJob", "mpijobs", "mpiReplicaSpecs", "mpijob"),
	{name: "PyJob", gvr: schema.GroupVersionResource{Group: "training.kiln.dev", Version: "v1beta1", Resource: "pyjobs"},
		podLabel: "training.kiln.dev/pyjob-name", suspend: specFlag},
	{name: "TrainJob", gvr: schema.GroupVersionResource{Group: "trainer.kubeflow.org", Version: "v1alpha1", Resource: "trainjobs"},
		podLabel: "jobset.sigs.k8s.io/jobset-name", suspend: specFlag},
	{name: "InferenceService", gvr: schema.GroupVersionResource{Group: "serving.kiln.dev", Version: "v1beta1", Resource: "inferenceservices"},
		aliases: []string{"isvc", "kiln-isvc"}, podLabel: "serving.kiln.dev/inferenceservice", serving: true},
	{name: "InferenceService", gvr: schema.GroupVersionResource{Group: "serving.kserve.io", Version: "v1beta1", Resource: "inferenceservices"},
		aliases: []string{"isvc", "kserve-isvc"}, podLabel: "serving.kserve.io/inferenceservice", serving: true},
}

func kubeflow(name, plural, specs, alias string) kind {
	return kind{name: name, gvr: kubeflowV1.WithResource(plural), aliases: []string{alias},
		podLabel: "training.kubeflow.org/job-name", replicaSpecs: specs, suspend: runPolicy,
		operator: strings.ToLower(name) + "-controller"}
}

// podSelector selects the pods of k's job name ("": of all k's jobs). Kubeflow's kinds share the
// job-name label: their operator-name label tells a TFJob's pods from a PyTorchJob's of the same
// name.
func (k kind) podSelector(name string) string {
	sel := k.podLabel
	if name != "" {
		sel += "=" + name
	}
	if k.operator != "" {
		sel += ",training.kubeflow.org/operator-name=" + k.operator
	}
	return sel
}

// title is how the table names the kind: its name, and its group where two kinds share it.
func (k kind) title() string {
	n := 0
	for _, o := range kinds {
		if o.name == k.name {
			n++
		}
	}
	if n > 1 {
		return k.name + "." + k.gvr.Group
	}
	return k.name
}

// matches says whether what a user typed names k: its name, plural, an alias, or any of them
// followed by its group.
func (k kind) matches(typed string) bool {
	typed = strings.ToLower(typed)
	names := append([]string{strings.ToLower(k.name), k.gvr.Resource}, k.aliases...)
	for _, n := range names {
		if typed == n || typed == n+"."+k.gvr.Group {
			return true
		}
	}
	return false
}

// kindsNamed are the kinds what a user typed names ("all": every kind).
func kindsNamed(typed string) ([]kind, error) {
	if typed == "" || typed == "all" {
		return kinds, nil
	}
	var out []kind
	for _, k := range kinds {
		if k.matches(typed) {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		var names []string
		for _, k := range kinds {
			names = append(names, strings.ToLower(k.name))
		}
		return nil, fmt.Errorf("kiln has no kind %q: use one of %s, or all", typed, strings.Join(slices.Compact(names), ", "))
	}
	return out, nil
}

// State names, beside the conditions' types the statuses use.
const (
	stateReady    = "Ready"
	stateNotReady = "NotReady"
	statePending  = "Pending"
)

// summary is what a job's status says in one line: its state, and, while it waits or when it
// failed, why.
type summary struct {
	state, why string
	// ended: the job will not run again (Succeeded, Failed, Complete).
	ended, failed bool
}

// summarize reads obj's status as kind k writes it.
func (k kind) summarize(obj *unstructured.Unstructured) summary {
	conds := conditions(obj)
	if k.serving {
		c, ok := find(conds, "Ready")
		switch {
		case ok && c.status == "True":
			return summary{state: stateReady}
		case ok:
			return summary{state: stateNotReady, why: c.message}
		}
		return summary{state: statePending}
	}
	if k.name == "PyJob" {
		phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
		msg, _, _ := unstructured.NestedString(obj.Object, "status", "message")
		s := summary{state: phase, ended: phase == "Succeeded" || phase == "Failed", failed: phase == "Failed"}
		if s.state == "" {
			s.state = statePending
		}
		if phase != "Running" && phase != "Succeeded" {
			s.why = msg
		}
		return s
	}
	// Kubeflow's and Trainer's kinds: the newest condition that holds is the state.
	var last *condition
	for i := range conds {
		if conds[i].status == "True" {
			last = &conds[i]
		}
	}
	if last == nil && k.name == "TrainJob" {
		return trainJobState(obj, conds)
	}
	if last == nil {
		return summary{state: statePending}
	}
	s := summary{state: last.kind}
	switch last.kind {
	case "Succeeded", "Complete":
		s.ended = true
	case "Failed":
		s.ended, s.failed, s.why = true, true, last.message
	case "Running":
	default:
		s.why = last.message
	}
	return s
}

// trainJobState is the state of a TrainJob no condition of which holds, as Kubeflow's SDK reads it:
// Running once every Job of its JobSet has its pods ready (or done), Created before; kiln's Created
// or Running condition, false, says why it cannot run yet.
func trainJobState(obj *unstructured.Unstructured, conds []condition) summary {
	for _, c := range conds {
		switch c.kind {
		case "Created":
			return summary{state: statePending, why: c.message}
		case "Running":
			return summary{state: "Created", why: c.message}
		}
	}
	var job trainerv1alpha1.TrainJob
	_ = runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &job) // a status it cannot read counts nothing
	switch {
	case trainerv1alpha1.JobsRun(job.Status.JobsStatus):
		return summary{state: "Running"}
	case len(job.Status.JobsStatus) > 0:
		return summary{state: "Created"}
	}
	return summary{state: statePending}
}

// condition is one of a status's conditions, as Kubeflow's and metav1's both write them.
type condition struct {
	kind, status, reason, message, at string
}

func conditions(obj *unstructured.Unstructured) []condition {
	raw, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	var out []condition
	for _, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		s := func(k string) string { v, _ := m[k].(string); return v }
		out = append(out, condition{kind: s("type"), status: s("status"), reason: s("reason"), message: s("message"), at: s("lastTransitionTime")})
	}
	return out
}

func find(conds []condition, kind string) (condition, bool) {
	for _, c := range conds {
		if c.kind == kind {
			return c, true
		}
	}
	return condition{}, false
}

// desired is how many pods obj asks for (0: unknown, as a TrainJob whose runtime sets it).
func (k kind) desired(obj *unstructured.Unstructured) int64 {
	switch {
	case k.replicaSpecs != "":
		specs, _, _ := unstructured.NestedMap(obj.Object, "spec", k.replicaSpecs)
		var n int64
		for _, s := range specs {
			r, ok := s.(map[string]any)["replicas"]
			if !ok {
				n++ // Kubeflow's default
				continue
			}
			n += toInt(r)
		}
		return n
	case k.name == "PyJob":
		if n, ok, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "workers"); ok {
			return toInt(n)
		}
		return 1
	case k.name == "TrainJob":
		if n, ok, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "trainer", "numNodes"); ok {
			return toInt(n)
		}
	}
	return 0
}

func toInt(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	case string:
		i, _ := strconv.ParseInt(n, 10, 64)
		return i
	}
	return 0
}

// replicaName is how a pod of kind k is called in logs and tables: worker-1, node-0, or, where
// the kind gives pods no index, the pod's name.
func (k kind) replicaName(pod *corev1.Pod) string {
	l := pod.Labels
	switch {
	case l["training.kubeflow.org/replica-type"] != "":
		return strings.ToLower(l["training.kubeflow.org/replica-type"]) + "-" + l["training.kubeflow.org/replica-index"]
	case l["jobset.sigs.k8s.io/replicatedjob-name"] != "":
		return l["jobset.sigs.k8s.io/replicatedjob-name"] + "-" + l["batch.kubernetes.io/job-completion-index"]
	case k.name == "PyJob" && l["batch.kubernetes.io/job-completion-index"] != "":
		return "worker-" + l["batch.kubernetes.io/job-completion-index"]
	case k.name == "PyJob": // one worker: its Job is not indexed
		return "worker-0"
	}
	return pod.Name
}

// replicaType is the type part of a replica's name: worker of worker-1.
func replicaType(replica string) string {
	if i := strings.LastIndexByte(replica, '-'); i > 0 {
		if _, err := strconv.Atoi(replica[i+1:]); err == nil {
			return replica[:i]
		}
	}
	return replica
}
