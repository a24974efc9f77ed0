package devcluster

import (
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	kservev1beta1 "github.com/kiln-ml/kiln/api/serving.kserve.io/v1beta1"
	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
	trainerv1alpha1 "github.com/kiln-ml/kiln/api/trainer.kubeflow.org/v1alpha1"
	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
)

// JobRow is one line of the live table.
type JobRow struct {
	Kind, Name, State         string
	Active, Succeeded, Failed int32
	Age                       time.Duration
	Finished                  bool
}

// RowOf summarises a training job: its state is the type of its last condition, as the State
// printer column shows it, and the counts add up every replica type.
func RowOf(kind string, job kubeflowv1.Job, now time.Time) JobRow {
	r := JobRow{Kind: kind, Name: job.GetName(), State: "Pending", Age: now.Sub(job.GetCreationTimestamp().Time)}
	st := job.GetJobStatus()
	if n := len(st.Conditions); n > 0 {
		last := st.Conditions[n-1]
		r.State = string(last.Type)
		r.Finished = last.Status == corev1.ConditionTrue && (last.Type == kubeflowv1.JobSucceeded || last.Type == kubeflowv1.JobFailed)
	}
	for _, rs := range st.ReplicaStatuses {
		r.Active += rs.Active
		r.Succeeded += rs.Succeeded
		r.Failed += rs.Failed
	}
	return r
}

// PyJobRow summarises a PyJob: its phase, and its workers' counts.
func PyJobRow(job *trainingv1alpha1.PyJob, now time.Time) JobRow {
	st := job.Status
	state := string(st.Phase)
	if state == "" {
		state = "Pending"
	}
	return JobRow{
		Kind: "PyJob", Name: job.Name, State: state, Age: now.Sub(job.CreationTimestamp.Time),
		Active: st.Workers.Active, Succeeded: st.Workers.Succeeded, Failed: st.Workers.Failed,
		Finished: st.Phase == trainingv1alpha1.PyJobSucceeded || st.Phase == trainingv1alpha1.PyJobFailed,
	}
}

// TrainJobRow summarises a TrainJob: its state is the type of its last true condition, else, as
// Kubeflow's SDK reports it, Running once its counts say so and Created once it has counts; the
// counts are its JobSet's Jobs (jobsStatus), not pods.
func TrainJobRow(job *trainerv1alpha1.TrainJob, now time.Time) JobRow {
	r := JobRow{Kind: trainerv1alpha1.TrainJobKind, Name: job.Name, State: "Pending", Age: now.Sub(job.CreationTimestamp.Time)}
	switch {
	case trainerv1alpha1.JobsRun(job.Status.JobsStatus):
		r.State = "Running"
	case len(job.Status.JobsStatus) > 0:
		r.State = "Created"
	}
	for _, c := range job.Status.Conditions {
		if c.Status == metav1.ConditionTrue {
			r.State = c.Type
		}
	}
	r.Finished = meta.IsStatusConditionTrue(job.Status.Conditions, trainerv1alpha1.TrainJobComplete) ||
		meta.IsStatusConditionTrue(job.Status.Conditions, trainerv1alpha1.TrainJobFailed)
	for _, s := range job.Status.JobsStatus {
		r.Active += ptr.Deref(s.Active, 0)
		r.Succeeded += ptr.Deref(s.Succeeded, 0)
		r.Failed += ptr.Deref(s.Failed, 0)
	}
	return r
}

// Table renders rows sorted by kind and name.
func Table(rows []JobRow) string {
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Kind != rows[j].Kind {
			return rows[i].Kind < rows[j].Kind
		}
		return rows[i].Name < rows[j].Name
	})
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "KIND\tNAME\tSTATE\tACTIVE\tSUCCEEDED\tFAILED\tAGE")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\t%s\n", r.Kind, r.Name, r.State, r.Active, r.Succeeded, r.Failed, r.Age.Round(time.Second))
	}
	w.Flush()
	return b.String()
}

// ServiceRow is one line of the live table's InferenceService part.
type ServiceRow struct {
	Name, State, URL        string
	Replicas, ReadyReplicas int32
	Age                     time.Duration
	Ready                   bool
}

// InferenceServiceRow summarises an InferenceService: Ready, or the reason its Ready condition
// gives, and its ready pods of both versions.
func InferenceServiceRow(isvc *servingv1alpha1.InferenceService, now time.Time) ServiceRow {
	st := isvc.Status
	r := ServiceRow{Name: isvc.Name, State: "Pending", URL: st.URL, Replicas: st.Replicas, ReadyReplicas: st.ReadyReplicas,
		Age: now.Sub(isvc.CreationTimestamp.Time)}
	if c := meta.FindStatusCondition(st.Conditions, "Ready"); c != nil {
		r.Ready = c.Status == metav1.ConditionTrue
		r.State = c.Reason
	}
	return r
}

// KServeInferenceServiceRow is the row of KServe's InferenceService, its replicas the model's
// ready copies.
func KServeInferenceServiceRow(isvc *kservev1beta1.InferenceService, now time.Time) ServiceRow {
	st := isvc.Status
	r := ServiceRow{Name: isvc.Name, State: "Pending", URL: st.URL, Age: now.Sub(isvc.CreationTimestamp.Time)}
	if c := st.ModelStatus.ModelCopies; c != nil {
		r.Replicas, r.ReadyReplicas = c.TotalCopies, c.TotalCopies
	}
	if c := meta.FindStatusCondition(st.Conditions, "Ready"); c != nil {
		r.Ready = c.Status == metav1.ConditionTrue
		r.State = c.Reason
	}
	return r
}

// ServiceTable renders InferenceService rows sorted by name.
func ServiceTable(rows []ServiceRow) string {
	sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "INFERENCESERVICE\tSTATE\tREADY\tURL\tAGE")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\t%d/%d\t%s\t%s\n", r.Name, r.State, r.ReadyReplicas, r.Replicas, r.URL, r.Age.Round(time.Second))
	}
	w.Flush()
	return b.String()
}
