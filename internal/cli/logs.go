package cli

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// serverContainers are the containers that run a job's or a model server's code, by the names
// kiln gives them (Kubeflow's frameworks, PyJob's, TrainJob's, KServe's): logs reads these unless
// -c names another or the pod names its default.
var serverContainers = []string{"tensorflow", "pytorch", "xgboost", "jax", "paddle", "mpi", "trainer", "node", "kserve-container", "predictor"}

type logOptions struct {
	replica, container string
	follow, previous   bool
	since              time.Duration
}

func (s *session) logsCommand() *cobra.Command {
	var o logOptions
	cmd := s.onJob(&cobra.Command{
		Use:   "logs JOB",
		Short: "Every replica's log, each line prefixed with its replica ([worker-1]), following new and restarted pods",
		Example: `  kubectl kiln logs mnist
  kubectl kiln logs mnist --replica worker-1 -f
  kubectl kiln logs mnist --replica worker --previous`,
	}, func(ctx context.Context, j job) error { return s.logs(ctx, j, o) })
	cmd.Flags().StringVar(&o.replica, "replica", "all", "a replica (worker-1), a replica type (worker), or all")
	cmd.Flags().StringVarP(&o.container, "container", "c", "", "the container (default: the pod's server or training container)")
	cmd.Flags().BoolVarP(&o.follow, "follow", "f", false, "follow the logs, of new and restarted pods too, until the job ends")
	cmd.Flags().BoolVarP(&o.previous, "previous", "p", false, "a restarted replica's previous run first")
	cmd.Flags().DurationVar(&o.since, "since", 0, "only lines newer than this (5m, 1h)")
	return cmd
}

// wanted says whether replica is one o asks for.
func (o logOptions) wanted(replica string) bool {
	return o.replica == "" || o.replica == "all" || o.replica == replica || o.replica == replicaType(replica)
}

// mainContainer is the container of pod whose log is read: -c's, the pod's default container,
// else the first that runs the job's code, else the first.
func mainContainer(pod *corev1.Pod, asked string) string {
	if asked != "" {
		return asked
	}
	if c := pod.Annotations["kubectl.kubernetes.io/default-container"]; c != "" {
		return c
	}
	for _, c := range pod.Spec.Containers {
		if slices.Contains(serverContainers, c.Name) {
			return c.Name
		}
	}
	if len(pod.Spec.Containers) == 0 {
		return ""
	}
	return pod.Spec.Containers[0].Name
}

// logs prints the logs of j's replicas o asks for.
func (s *session) logs(ctx context.Context, j job, o logOptions) error {
	out := &prefixed{w: s.Out, errs: s.ErrOut}
	if !o.follow {
		pods, err := s.pods(ctx, j)
		if err != nil {
			return err
		}
		found, read := 0, 0
		for i := range pods {
			p := &pods[i]
			replica := j.kind.replicaName(p)
			if !o.wanted(replica) {
				continue
			}
			found++
			if err := s.podLog(ctx, p, replica, o, out); err != nil {
				out.errorf("[%s] %v", replica, err)
			} else {
				read++
			}
		}
		switch {
		case found == 0:
			return fmt.Errorf("%s has no pods%s yet", j.ref(), replicaSaid(o.replica))
		case read == 0:
			return fmt.Errorf("no log of %s could be read: kubectl kiln describe %s says why its pods do not run", j.ref(), j.ref())
		}
		return nil
	}
	return s.follow(ctx, j, o, out)
}

func replicaSaid(replica string) string {
	if replica == "" || replica == "all" {
		return ""
	}
	return " for replica " + replica
}

// podLog prints one pod's log: its previous run first when asked and there was one, then the
// current one.
func (s *session) podLog(ctx context.Context, p *corev1.Pod, replica string, o logOptions, out *prefixed) error {
	container := mainContainer(p, o.container)
	if err := s.previousRun(ctx, p, container, replica, o, out); err != nil {
		out.errorf("[%s previous] %v", replica, err) // the current run's log may still be there
	}
	return s.stream(ctx, p, container, replica, o, false, false, out)
}

// previousRun prints the log of the container's previous run, when o asks for it and there was one.
func (s *session) previousRun(ctx context.Context, p *corev1.Pod, container, replica string, o logOptions, out *prefixed) error {
	if !o.previous || restartsOf(p, container) == 0 {
		return nil
	}
	return s.stream(ctx, p, container, replica+" previous", o, true, false, out)
}

func (s *session) stream(ctx context.Context, p *corev1.Pod, container, prefix string, o logOptions, previous, follow bool, out *prefixed) error {
	opts := &corev1.PodLogOptions{Container: container, Follow: follow, Previous: previous}
	if o.since > 0 && !previous {
		secs := int64(o.since.Seconds())
		opts.SinceSeconds = &secs
	}
	rc, err := s.core.Pods(p.Namespace).GetLogs(p.Name, opts).Stream(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = rc.Close() }()
	return out.copy(prefix, rc)
}

func restartsOf(p *corev1.Pod, container string) int32 {
	if cs := statusOf(p, container); cs != nil {
		return cs.RestartCount
	}
	return 0
}

func statusOf(p *corev1.Pod, container string) *corev1.ContainerStatus {
	for i, cs := range p.Status.ContainerStatuses {
		if cs.Name == container {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// follow streams every wanted replica's log as its pods are created and restarted, until the
// job ends and every stream has ended (or ctx ends: Ctrl-C).
func (s *session) follow(ctx context.Context, j job, o logOptions, out *prefixed) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	running := 0
	followed := map[string]bool{} // by pod UID
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	defer out.clearStatus()
	defer wg.Wait()
	// Whatever ends the follow ends every stream it started (deferred calls run last first).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if isTerminal(s.ErrOut) {
		out.status = s.ErrOut
	}
	start := time.Now()
	var endedAt time.Time
	failures := 0
	for {
		pods, err := s.pods(ctx, j)
		sum, ended, nowErr := s.now(ctx, &j)
		if err = cmp.Or(err, nowErr); err != nil && ctx.Err() == nil {
			// A request that fails now and then (a timeout, a 429) is retried; many in a row end it.
			if failures++; failures >= maxFailures {
				return err
			}
			out.errorf("%s: %v (retrying)", j.ref(), err)
		} else if err == nil {
			failures = 0
		}
		for i := range pods {
			p := pods[i]
			replica := j.kind.replicaName(&p)
			if followed[string(p.UID)] || !o.wanted(replica) {
				continue
			}
			followed[string(p.UID)] = true
			mu.Lock()
			running++
			mu.Unlock()
			wg.Go(func() {
				defer func() { mu.Lock(); running--; mu.Unlock() }()
				if err := s.followPod(ctx, &p, replica, o, out); err != nil && ctx.Err() == nil {
					out.errorf("[%s] %v", replica, err)
				}
			})
		}
		if nowErr == nil {
			out.setStatus(fmt.Sprintf("%s: %s, %s, %s", j.ref(), sum.state, progressOf(j, pods), duration.HumanDuration(time.Since(start))))
		}
		mu.Lock()
		idle := running == 0
		mu.Unlock()
		switch {
		case ended && idle:
			return nil
		case ended && endedAt.IsZero():
			endedAt = time.Now()
		case ended && time.Since(endedAt) > drain+pollEvery:
			// Pods that outlive their job (cleanPodPolicy None) are not followed past its end.
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// maxFailures is how many reads of the cluster in a row may fail before a follow gives up.
const maxFailures = 10

// now reads j again (into j) and says what its status says and whether it has ended (serving
// kinds never end; a job that is gone has).
func (s *session) now(ctx context.Context, j *job) (summary, bool, error) {
	obj, err := s.dyn.Resource(j.kind.gvr).Namespace(j.obj.GetNamespace()).Get(ctx, j.name(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return summary{state: "Deleted"}, true, nil
	}
	if err != nil {
		return summary{}, false, err
	}
	j.obj = obj
	sum := j.kind.summarize(obj)
	return sum, sum.ended && !j.kind.serving, nil
}

// followPod streams each run of the pod's container as it starts (a restart starts a new
// stream), until the pod has ended or gone.
func (s *session) followPod(ctx context.Context, p *corev1.Pod, replica string, o logOptions, out *prefixed) error {
	container := mainContainer(p, o.container)
	streamed := int32(-1) // the restart count of the run last streamed
	if err := s.previousRun(ctx, p, container, replica, o, out); err != nil {
		out.errorf("[%s previous] %v", replica, err)
	}
	for {
		fresh, err := s.core.Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && fresh.UID != p.UID) {
			return nil
		}
		if err != nil {
			return err
		}
		cs := statusOf(fresh, container)
		started := cs != nil && (cs.State.Running != nil || cs.State.Terminated != nil)
		switch {
		case started && cs.RestartCount > streamed:
			streamed = cs.RestartCount
			if err := s.followRun(ctx, fresh, container, replica, o, out); err != nil {
				return err
			}
			continue
		case fresh.Status.Phase == corev1.PodSucceeded || fresh.Status.Phase == corev1.PodFailed || fresh.DeletionTimestamp != nil:
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pollEvery):
		}
	}
}

// drain is how long a followed stream may still deliver lines once its run has ended.
const drain = 2 * time.Second

// followRun streams one run of the pod's container, following it. A kubelet ends the stream when
// the run ends; not every server does (kwok keeps it open), so the stream is also ended once the
// pod shows the run over and its last lines had drain to arrive.
func (s *session) followRun(ctx context.Context, p *corev1.Pod, container, replica string, o logOptions, out *prefixed) error {
	restarts := restartsOf(p, container)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for {
			select {
			case <-runCtx.Done():
				return
			case <-time.After(pollEvery):
			}
			if s.runOver(runCtx, p, container, restarts) {
				select {
				case <-runCtx.Done():
				case <-time.After(drain):
				}
				cancel()
				return
			}
		}
	}()
	err := s.stream(runCtx, p, container, replica, o, false, true, out)
	if ctx.Err() == nil && runCtx.Err() != nil {
		return nil // ended here, as the run did
	}
	return err
}

// runOver says whether the run of the pod's container that had restarts restarts has ended: the
// pod is gone or replaced, the container ended or restarted.
func (s *session) runOver(ctx context.Context, p *corev1.Pod, container string, restarts int32) bool {
	fresh, err := s.core.Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true
	case err != nil:
		return false
	case fresh.UID != p.UID || fresh.DeletionTimestamp != nil:
		return true
	}
	cs := statusOf(fresh, container)
	return cs != nil && (cs.RestartCount != restarts || cs.State.Terminated != nil)
}

// prefixed writes whole lines, each after its replica's prefix, from streams read at once; on a
// terminal it keeps a progress line under them.
type prefixed struct {
	mu   sync.Mutex
	w    io.Writer
	errs io.Writer
	// status is the terminal the progress line is drawn on, nil for none; line is that line.
	status io.Writer
	line   string
}

// lineLimit is the longest log line printed whole; the rest of a longer one is left out (a
// progress bar that redraws itself with carriage returns makes such lines).
const lineLimit = 64 * 1024

func (p *prefixed) copy(prefix string, r io.Reader) error {
	br := bufio.NewReaderSize(r, lineLimit)
	for {
		line, err := br.ReadSlice('\n')
		cut := errors.Is(err, bufio.ErrBufferFull)
		if len(line) > 0 {
			text := strings.TrimRight(string(line), "\r\n")
			if cut {
				text += " [cut: the line is longer than 64 KiB]"
			}
			p.mu.Lock()
			p.erase()
			_, werr := fmt.Fprintf(p.w, "[%s] %s\n", prefix, text)
			p.draw()
			p.mu.Unlock()
			if werr != nil {
				return werr
			}
		}
		for cut { // skip the rest of the line
			_, err = br.ReadSlice('\n')
			cut = errors.Is(err, bufio.ErrBufferFull)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// errorf writes a line to the error stream, above the progress line.
func (p *prefixed) errorf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.erase()
	fmt.Fprintf(p.errs, format+"\n", args...)
	p.draw()
}

// setStatus draws line as the progress line, in place of the one before.
func (p *prefixed) setStatus(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.erase()
	p.line = line
	p.draw()
}

// clearStatus erases the progress line for good.
func (p *prefixed) clearStatus() { p.setStatus("") }

func (p *prefixed) erase() {
	if p.status != nil && p.line != "" {
		fmt.Fprint(p.status, "\r\x1b[K")
	}
}

func (p *prefixed) draw() {
	if p.status != nil && p.line != "" {
		fmt.Fprint(p.status, p.line)
	}
}
