package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
)

// kserveStop is the annotation that stops a KServe InferenceService (its suspend).
const kserveStop = "serving.kserve.io/stop"

func (s *session) waitCommand() *cobra.Command {
	var until string
	var timeout time.Duration
	cmd := s.onJob(&cobra.Command{
		Use:   "wait JOB --for=succeeded|running|ready",
		Short: "Wait until a job has succeeded, runs, or is ready; fail at once if it fails",
		Example: `  kubectl kiln wait mnist --for=succeeded --timeout=30m
  kubectl kiln wait isvc/iris --for=ready`,
	}, func(ctx context.Context, j job) error {
		if until != "succeeded" && until != "running" && until != "ready" {
			return fmt.Errorf("--for=%q: wait for succeeded, running or ready", until)
		}
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		return s.wait(ctx, j, until)
	})
	cmd.Flags().StringVar(&until, "for", "succeeded", "succeeded, running, or ready (every replica ready; an InferenceService's Ready)")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long (0: never)")
	return cmd
}

// progress is how far a job's replicas are, for a person watching: running and succeeded of the
// total, and the time waited.
type progress struct {
	running, ready, succeeded, total int64
}

func progressOf(j job, pods []corev1.Pod) progress {
	pr := progress{total: j.kind.desired(j.obj)}
	for i := range pods {
		switch p := &pods[i]; {
		case p.Status.Phase == corev1.PodSucceeded:
			pr.succeeded++
		case p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil:
			pr.running++
			if podReady(p) {
				pr.ready++
			}
		}
	}
	if pr.total == 0 {
		pr.total = int64(len(pods))
	}
	return pr
}

func (p progress) String() string {
	return fmt.Sprintf("%d running, %d succeeded of %d", p.running, p.succeeded, p.total)
}

// wait polls j until it reaches until (succeeded, running or ready), showing its progress on a
// terminal; a job that fails, or ends without getting there, is an error.
func (s *session) wait(ctx context.Context, j job, until string) error {
	start := time.Now()
	tty := isTerminal(s.ErrOut)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		sum, _, err := s.now(ctx, &j)
		switch {
		case ctx.Err() != nil:
			return s.waitedTooLong(j, until, start)
		case err != nil:
			return err
		case sum.state == "Deleted":
			return fmt.Errorf("%s was deleted", j.ref())
		}
		pods, err := s.pods(ctx, j)
		if err != nil && ctx.Err() == nil {
			return err
		}
		pr := progressOf(j, pods)
		if tty {
			fmt.Fprintf(s.ErrOut, "\r\x1b[K%s: %s, %s, %s", j.ref(), sum.state, pr, duration.HumanDuration(time.Since(start)))
		}
		done, err := reached(j.kind, sum, pr, until)
		if tty && (done || err != nil) {
			fmt.Fprintln(s.ErrOut)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", j.ref(), err)
		}
		if done {
			fmt.Fprintf(s.Out, "%s %s\n", j.ref(), strings.ToLower(sum.state))
			return nil
		}
		select {
		case <-ctx.Done():
			if tty {
				fmt.Fprintln(s.ErrOut)
			}
			return s.waitedTooLong(j, until, start)
		case <-tick.C:
		}
	}
}

func (s *session) waitedTooLong(j job, until string, start time.Time) error {
	return fmt.Errorf("%s is not %s after %s: kubectl kiln describe %s says why it waits", j.ref(), until, duration.HumanDuration(time.Since(start)), j.ref())
}

// reached says whether a job whose status says sum and whose pods are at pr has got to until;
// an error when it never will.
func reached(k kind, sum summary, pr progress, until string) (bool, error) {
	succeeded := sum.state == "Succeeded" || sum.state == "Complete"
	switch {
	case sum.failed:
		return false, fmt.Errorf("failed: %s", orNone(oneLine(sum.why)))
	case k.serving && until == "succeeded":
		return false, fmt.Errorf("an InferenceService serves until deleted, it does not succeed: wait --for=ready")
	case k.serving:
		return sum.state == stateReady, nil
	case succeeded:
		return true, nil // it ran, and every replica was ready at some point
	case sum.ended:
		return false, fmt.Errorf("ended %s without succeeding", sum.state)
	case until == "running":
		return sum.state == "Running", nil
	case until == "ready":
		return pr.total > 0 && pr.ready >= pr.total, nil
	}
	return false, nil
}

func (s *session) suspendCommand(suspend bool) *cobra.Command {
	verb, what := "suspend", "Suspend a job: its pods go, it keeps its place; an InferenceService of KServe's stops"
	if !suspend {
		verb, what = "resume", "Resume a suspended job (or a stopped KServe InferenceService)"
	}
	return s.onJob(&cobra.Command{Use: verb + " JOB", Short: what}, func(ctx context.Context, j job) error {
		patch, err := suspendPatch(j.kind, suspend)
		if err != nil {
			return fmt.Errorf("%s: %w", j.ref(), err)
		}
		if _, err := s.dyn.Resource(j.kind.gvr).Namespace(j.obj.GetNamespace()).Patch(ctx, j.name(), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return err
		}
		fmt.Fprintf(s.Out, "%s %sed\n", j.ref(), strings.TrimSuffix(verb, "e"))
		return nil
	})
}

// suspendPatch is the merge patch that suspends (or resumes) a job of kind k.
func suspendPatch(k kind, suspend bool) ([]byte, error) {
	if k.gvr.Group == "serving.kserve.io" {
		var stop any = "true"
		if !suspend {
			stop = nil
		}
		return json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{kserveStop: stop}}})
	}
	if k.suspend == nil {
		return nil, fmt.Errorf("a %s does not suspend: scale it with minReplicas, or delete it", k.name)
	}
	var patch any = suspend
	for i := len(k.suspend) - 1; i >= 0; i-- {
		patch = map[string]any{k.suspend[i]: patch}
	}
	return json.Marshal(patch)
}

func (s *session) deleteCommand() *cobra.Command {
	var withOutput bool
	cmd := s.onJob(&cobra.Command{
		Use:   "delete JOB",
		Short: "Delete a job (and, with --with-output, the output claim a PyJob retained)",
	}, func(ctx context.Context, j job) error { return s.delete(ctx, s.Out, j, withOutput) })
	cmd.Flags().BoolVar(&withOutput, "with-output", false, "also delete the output claim a PyJob keeps (reclaimPolicy Retain)")
	return cmd
}

func (s *session) delete(ctx context.Context, out io.Writer, j job, withOutput bool) error {
	ns := j.obj.GetNamespace()
	// The claim kiln made for a PyJob's output outlives it unless its policy is Delete; a claim
	// the user named is the user's.
	claim, _, _ := unstructured.NestedString(j.obj.Object, "status", "outputClaimName")
	policy, _, _ := unstructured.NestedString(j.obj.Object, "spec", "output", "reclaimPolicy")
	if named, _, _ := unstructured.NestedString(j.obj.Object, "spec", "output", "claimName"); named != "" || policy == "Delete" {
		claim = ""
	}
	if err := s.dyn.Resource(j.kind.gvr).Namespace(ns).Delete(ctx, j.name(), metav1.DeleteOptions{}); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s deleted\n", j.ref())
	switch {
	case withOutput && claim != "":
		if err := s.core.PersistentVolumeClaims(ns).Delete(ctx, claim, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the output claim %s: %w", claim, err)
		}
		fmt.Fprintf(out, "persistentvolumeclaim/%s deleted\n", claim)
	case withOutput:
		fmt.Fprintf(out, "%s kept no output claim\n", j.ref())
	case claim != "":
		fmt.Fprintf(out, "its output claim persistentvolumeclaim/%s is kept (kubectl kiln delete --with-output deletes it too)\n", claim)
	}
	return nil
}
