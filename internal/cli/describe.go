package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/kiln-ml/kiln/internal/stuck"
)

func (s *session) describeCommand() *cobra.Command {
	return s.onJob(&cobra.Command{
		Use:   "describe JOB",
		Short: "What a job's status says, why it waits, each replica's pods, and its events in order",
		Example: `  kubectl kiln describe mnist
  kubectl kiln describe pytorchjob/mnist -n team-a`,
	}, func(ctx context.Context, j job) error {
		pods, err := s.pods(ctx, j)
		if err != nil {
			return err
		}
		events, err := s.events(ctx, j)
		if err != nil {
			return err
		}
		return describe(s.Out, j, pods, events, time.Now())
	})
}

// events are j's events, oldest first.
func (s *session) events(ctx context.Context, j job) ([]corev1.Event, error) {
	list, err := s.core.Events(j.obj.GetNamespace()).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + j.name() + ",involvedObject.kind=" + j.kind.name})
	if err != nil {
		return nil, fmt.Errorf("listing events: %w", err)
	}
	slices.SortStableFunc(list.Items, func(a, b corev1.Event) int { return eventTime(a).Compare(eventTime(b)) })
	return list.Items, nil
}

func eventTime(e corev1.Event) time.Time {
	for _, t := range []time.Time{e.LastTimestamp.Time, e.EventTime.Time, e.FirstTimestamp.Time, e.CreationTimestamp.Time} {
		if !t.IsZero() {
			return t
		}
	}
	return time.Time{}
}

// describe writes what j's status says, why it waits, its replicas' pods and its events.
func describe(out io.Writer, j job, pods []corev1.Pod, events []corev1.Event, now time.Time) error {
	w := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	sum := j.kind.summarize(j.obj)
	fmt.Fprintf(w, "Name:\t%s\nNamespace:\t%s\nKind:\t%s (%s)\nState:\t%s\nAge:\t%s\n",
		j.name(), j.obj.GetNamespace(), j.kind.name, j.kind.gvr.GroupVersion(), sum.state,
		duration.HumanDuration(now.Sub(j.obj.GetCreationTimestamp().Time)))
	if n := j.kind.desired(j.obj); n > 0 {
		fmt.Fprintf(w, "Replicas:\t%d\n", n)
	}
	var why []string
	if sum.why != "" {
		why = append(why, oneLine(sum.why))
	}
	for i := range pods {
		p := &pods[i]
		reason, msg := stuck.Pod(p, j.kind.replicaName(p))
		// The status may say it already, naming the pod.
		if msg != "" && !slices.Contains(why, msg) && !(strings.Contains(sum.why, p.Name) && strings.Contains(sum.why, reason)) {
			why = append(why, msg)
		}
	}
	if len(why) > 0 {
		label := "Why it waits:"
		if sum.failed {
			label = "Why it failed:"
		}
		fmt.Fprintln(w, label)
		for _, line := range why {
			fmt.Fprintf(w, "  - %s\n", line)
		}
	}
	if conds := conditions(j.obj); len(conds) > 0 {
		fmt.Fprintln(w, "\nConditions:\n  TYPE\tSTATUS\tREASON\tSINCE\tMESSAGE")
		for _, c := range conds {
			fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\n", c.kind, c.status, c.reason, since(c.at, now), oneLine(c.message))
		}
	}
	fmt.Fprintln(w, "\nReplicas:")
	if len(pods) == 0 {
		fmt.Fprintln(w, "  (no pods)")
	} else {
		fmt.Fprintln(w, "  REPLICA\tPOD\tPHASE\tREADY\tRESTARTS\tLAST EXIT\tNODE")
		for i := range pods {
			p := &pods[i]
			restarts, exit := containerHistory(p)
			fmt.Fprintf(w, "  %s\t%s\t%s\t%t\t%d\t%s\t%s\n", j.kind.replicaName(p), p.Name, podPhase(p), podReady(p), restarts, exit, orNone(p.Spec.NodeName))
		}
	}
	fmt.Fprintln(w, "\nEvents:")
	if len(events) == 0 {
		fmt.Fprintln(w, "  (none)")
	} else {
		fmt.Fprintln(w, "  AGE\tTYPE\tREASON\tMESSAGE")
		for _, e := range events {
			count := ""
			if e.Count > 1 {
				count = fmt.Sprintf(" (x%d)", e.Count)
			}
			fmt.Fprintf(w, "  %s\t%s\t%s\t%s%s\n", duration.HumanDuration(now.Sub(eventTime(e))), e.Type, e.Reason, oneLine(e.Message), count)
		}
	}
	return w.Flush()
}

func since(at string, now time.Time) string {
	t, err := time.Parse(time.RFC3339, at)
	if err != nil {
		return "-"
	}
	return duration.HumanDuration(now.Sub(t))
}

// podPhase is the pod's phase, or what keeps it from running: a blocked container's reason, or
// Unschedulable.
func podPhase(p *corev1.Pod) string {
	if p.DeletionTimestamp != nil {
		return "Terminating"
	}
	if reason, _ := stuck.Pod(p, p.Name); reason != "" {
		return reason
	}
	return string(p.Status.Phase)
}

// containerHistory is the pod's restarts, summed over its containers, and how its containers
// last ended ("exit 1 (Error)"), or "-".
func containerHistory(p *corev1.Pod) (int32, string) {
	var restarts int32
	var exits []string
	for _, cs := range p.Status.ContainerStatuses {
		restarts += cs.RestartCount
		t := cs.State.Terminated
		if t == nil {
			t = cs.LastTerminationState.Terminated
		}
		if t != nil {
			exits = append(exits, fmt.Sprintf("exit %d (%s)", t.ExitCode, t.Reason))
		}
	}
	if len(exits) == 0 {
		return restarts, "-"
	}
	return restarts, strings.Join(exits, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
