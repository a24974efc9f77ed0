package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
	"github.com/kiln-ml/kiln/test/builder"
	"github.com/kiln-ml/kiln/test/testenv"
)

// pollEvery is how often kubectl kiln reads the cluster again (internal/cli's pollEvery).
const pollEvery = time.Second

// kubectlKiln runs `kubectl kiln` as a user does: the cluster's kubectl, finding the plugin
// kubectl-kiln on the PATH.
type kubectlKiln struct {
	dir, ns string
}

// plugin is kubectl-kiln, built once for the suite into a folder TestMain removes.
var plugin struct {
	once sync.Once
	dir  string
	err  error
}

func newKubectlKiln(t *testing.T, ns string) kubectlKiln {
	t.Helper()
	plugin.once.Do(func() {
		if plugin.dir, plugin.err = os.MkdirTemp("", "kubectl-kiln-"); plugin.err != nil {
			return
		}
		plugin.err = testenv.Build("kubectl-kiln", filepath.Join(plugin.dir, "kubectl-kiln"))
	})
	if plugin.err != nil {
		t.Fatal(plugin.err)
	}
	return kubectlKiln{dir: plugin.dir, ns: ns}
}

func (k kubectlKiln) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(cluster.Tools, "kubectl"), append([]string{"kiln", "-n", k.ns}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+k.dir+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+cluster.Kubeconfig)
	return cmd
}

// run runs the command, logs its output and returns it with the exit code.
func (k kubectlKiln) run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, code := k.output(t, args...)
	t.Logf("kubectl kiln %s (exit %d):\n%s", strings.Join(args, " "), code, out)
	return out, code
}

func (k kubectlKiln) output(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out bytes.Buffer
	cmd := k.command(ctx, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("kubectl kiln %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), code
}

// eventually runs the command until its output has every one of want.
func (k kubectlKiln) eventually(t *testing.T, want []string, args ...string) string {
	t.Helper()
	var out string
	testenv.EventuallyWithin(t, timeout, func() error {
		out, _ = k.output(t, args...)
		for _, w := range want {
			if !strings.Contains(out, w) {
				return fmt.Errorf("kubectl kiln %s lacks %q:\n%s", strings.Join(args, " "), w, out)
			}
		}
		return nil
	})
	t.Logf("kubectl kiln %s:\n%s", strings.Join(args, " "), out)
	return out
}

func mustContain(t *testing.T, what, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, out)
		}
	}
}

// Each command of kubectl kiln against real jobs of several kinds: a gang that waits for room, a
// PyJob whose image does not pull, a PyTorchJob of three workers one of which restarts, and a
// script run to its end.
func TestKubectlKilnOnARealCluster(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	kk := newKubectlKiln(t, ns)

	// A gang of five with room for four waits, and says so.
	cluster.AddSlotNode(t, ns, ns+"-a", 2)
	cluster.AddSlotNode(t, ns, ns+"-b", 2)
	create(t, testenv.SlotJob(builder.TFJob("gang", ns), "Worker", 5, "1h").Obj())
	// A PyJob whose image does not pull: this test plays its kubelet.
	pull := builder.PyJob("pull", ns)
	pull.Annotations = map[string]string{testenv.KubeletAnnotation: "test"}
	if err := cluster.Client.Create(context.Background(), pull); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyWithin(t, timeout, func() error {
		pods := cluster.Pods(t, ns, map[string]string{"pyjob-name": "pull"})
		if len(pods) != 1 {
			return testenv.Count("pods labelled pyjob-name=pull", len(pods), 1)
		}
		p := &pods[0]
		p.Status.Phase = corev1.PodPending
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name, Image: p.Spec.Containers[0].Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "example/nope:1"`}}}}
		p.Status.Conditions = nil
		return cluster.Client.Status().Update(context.Background(), p)
	})
	// Three workers and a master; worker 1 restarts in place once it runs.
	pt := create(t, builder.PyTorchJob("mnist", ns).Replicas("Master", 1).Replicas("Worker", 3).
		Annotate("Master", duration, "1h").Annotate("Worker", duration, "1h").Obj())
	waitCondition(t, pt, kubeflowv1.JobRunning)
	var worker1 corev1.Pod
	for _, p := range jobPods(t, pt) {
		if p.Labels[kubeflowv1.LabelReplicaType] == "worker" && p.Labels[kubeflowv1.LabelReplicaIndex] == "1" {
			worker1 = p
		}
	}
	cluster.RestartInPlace(t, &worker1, 1)
	// KServe's sklearn sample, Ready.
	testenv.ApplyKServeRuntimes(t, cluster.Client)
	sample := testenv.KServeManifests(t, "samples/sklearn/v1/sklearn.yaml")[0]
	sample.SetNamespace(ns)
	if err := cluster.Client.Create(context.Background(), sample); err != nil {
		t.Fatal(err)
	}

	t.Run("get", func(t *testing.T) {
		out := kk.eventually(t, []string{"KIND", "TFJob", "gang", "Created", "0/5", "waiting for 5 pods to be schedulable together",
			"PyJob", "pull", "ImagePullBackOff", "PyTorchJob", "mnist", "Running", "4/4",
			"InferenceService.serving.kserve.io", "sklearn-iris", "Ready"}, "get")
		mustContain(t, "get", out, "WHY")
		name, _ := kk.run(t, "get", "pytorchjobs", "-o", "name")
		if strings.TrimSpace(name) != "pytorchjob/mnist" {
			t.Errorf("get pytorchjobs -o name: %q, want pytorchjob/mnist", name)
		}
		js, _ := kk.run(t, "get", "pyjob", "-o", "json")
		mustContain(t, "get pyjob -o json", js, `"kind": "List"`, `"name": "pull"`)
		// Piped, -w prints the table once, then each row that changes as a line.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var watched testenv.SyncBuffer
		w := kk.command(ctx, "get", "-w")
		w.Stdout, w.Stderr = &watched, &watched
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cancel(); _ = w.Wait() }()
		testenv.EventuallyWithin(t, timeout, func() error {
			if !strings.Contains(watched.String(), "mnist") {
				return fmt.Errorf("get -w shows no table yet:\n%s", watched.String())
			}
			return nil
		})
		create(t, builder.TFJob("late", ns).Replicas("Worker", 1).Annotate("Worker", duration, "1h").Obj())
		testenv.EventuallyWithin(t, timeout, func() error {
			if out := watched.String(); !strings.Contains(out, "late") || strings.Count(out, "KIND") != 1 {
				return fmt.Errorf("get -w: want one header, then a line for the new job:\n%s", out)
			}
			return nil
		})
		t.Logf("kubectl kiln get -w, piped:\n%s", watched.String())
		// Shell completion offers the namespace's jobs.
		out, _ = kk.run(t, "__complete", "describe", "")
		mustContain(t, "completion of describe", out, "gang\n", "mnist\n", "pull\n", "late\n")
	})
	t.Run("describe", func(t *testing.T) {
		out, _ := kk.run(t, "describe", "gang")
		mustContain(t, "describe gang", out, "Why it waits:", "waiting for 5 pods to be schedulable together", "worker-4", "Events:")
		out, _ = kk.run(t, "describe", "pyjob/pull")
		mustContain(t, "describe pull", out, "Why it waits:", "ImagePullBackOff", `example/nope:1`, "worker-0")
		out, _ = kk.run(t, "describe", "mnist")
		mustContain(t, "describe mnist", out, "State:      Running", "master-0", "worker-2")
		if _, code := kk.run(t, "describe", "nothing"); code == 0 {
			t.Error("describe of a job that does not exist: exit 0")
		}
	})
	t.Run("logs", func(t *testing.T) {
		out, _ := kk.run(t, "logs", "mnist", "--replica", "worker")
		mustContain(t, "logs --replica worker", out, "[worker-0] epoch 3/3", "[worker-1] epoch 3/3", "[worker-2] epoch 3/3")
		if strings.Contains(out, "[master-0]") {
			t.Errorf("logs --replica worker printed the master's:\n%s", out)
		}
		out, _ = kk.run(t, "logs", "isvc/sklearn-iris")
		mustContain(t, "logs isvc/sklearn-iris", out, "] model ready: serving HTTP on :8080")
		// The simulated log's lines are older than a second: --since reaches the server.
		if out, _ = kk.run(t, "logs", "mnist", "--since", "1s"); strings.Contains(out, "epoch") {
			t.Errorf("logs --since 1s printed lines older than a second:\n%s", out)
		}
		out, _ = kk.run(t, "logs", "mnist", "--replica", "worker-1", "--previous")
		mustContain(t, "logs --previous", out, "[worker-1 previous] killed: out of memory", "[worker-1] saved the model")
		// -f follows every replica, and goes on until the job ends: here, once the master (which
		// this test ends, as its kubelet) succeeds.
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		var followed testenv.SyncBuffer
		f := kk.command(ctx, "logs", "mnist", "-f")
		f.Stdout, f.Stderr = &followed, &followed
		if err := f.Start(); err != nil {
			t.Fatal(err)
		}
		ended := make(chan error, 1)
		go func() { ended <- f.Wait() }()
		testenv.EventuallyWithin(t, timeout, func() error {
			for _, r := range []string{"master-0", "worker-0", "worker-1", "worker-2"} {
				if !strings.Contains(followed.String(), "["+r+"] saved the model") {
					return fmt.Errorf("logs -f has no log of %s yet:\n%s", r, followed.String())
				}
			}
			return nil
		})
		select {
		case err := <-ended:
			t.Fatalf("logs -f ended (%v) while the job runs:\n%s", err, followed.String())
		case <-time.After(2 * pollEvery):
		}
		for _, p := range jobPods(t, pt) {
			if p.Labels[kubeflowv1.LabelReplicaType] == "master" {
				cluster.Exit(t, &p, 0)
			}
		}
		if err := <-ended; err != nil {
			t.Errorf("logs -f: %v once the job ended:\n%s", err, followed.String())
		}
		if j, _ := get(t, pt); !hasTrue(j, kubeflowv1.JobSucceeded) {
			t.Error("logs -f ended before the job did")
		}
		t.Logf("kubectl kiln logs mnist -f:\n%s", followed.String())
	})
	t.Run("run, wait, suspend, resume, delete", func(t *testing.T) {
		script := filepath.Join(t.TempDir(), "train_mnist.py")
		if err := os.WriteFile(script, []byte("print('training')\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out, _ := kk.run(t, "run", script, "--dry-run=client", "-o", "yaml")
		mustContain(t, "run --dry-run", out, "kind: PyJob", "generateName: train-mnist-", "print('training')")
		out, code := kk.run(t, "run", script, "--name", "hello", "--output", "1Gi", "--annotation", duration+"=3s", "--follow")
		if code != 0 {
			t.Errorf("run --follow of a run that succeeds: exit %d", code)
		}
		mustContain(t, "run --follow", out, "pyjob/hello created", "[worker-0] epoch 3/3", "pyjob/hello succeeded")
		// The seed documents' label finds the run's pods.
		mustContain(t, "kubectl logs -l pyjob-name=hello", kubectl(t, "logs", "-n", ns, "-l", "pyjob-name=hello"), "saved the model")
		out, code = kk.run(t, "run", script, "--name", "fails", "--backoff-limit", "0", "--annotation", duration+"=2s", "--annotation", exitCode+"=3", "--follow")
		if code != 1 {
			t.Errorf("run --follow of a run that fails: exit %d, want 1", code)
		}
		mustContain(t, "run --follow (failing)", out, "pyjob/fails failed")
		out, code = kk.run(t, "wait", "hello", "--for=succeeded", "--timeout", "10s")
		if code != 0 || !strings.Contains(out, "pyjob/hello succeeded") {
			t.Errorf("wait --for=succeeded on a succeeded run: exit %d", code)
		}
		if out, code = kk.run(t, "wait", "fails", "--for=succeeded"); code == 0 || !strings.Contains(out, "exited with code 3") {
			t.Errorf("wait --for=succeeded on a failed run: exit %d, want an error with its exit code", code)
		}
		if _, code = kk.run(t, "wait", "gang", "--for=running", "--timeout", "2s"); code == 0 {
			t.Error("wait --for=running on a gang that cannot run: exit 0 after the timeout")
		}
		kk.run(t, "suspend", "gang")
		kk.eventually(t, []string{"Suspended"}, "get", "tfjob")
		kk.run(t, "resume", "gang")
		kk.eventually(t, []string{"waiting for 5 pods"}, "get", "tfjob")
		fresh := &trainingv1alpha1.PyJob{}
		if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "hello"}, fresh); err != nil {
			t.Fatal(err)
		}
		claim := fresh.Status.OutputClaimName
		out, _ = kk.run(t, "delete", "hello", "--with-output")
		mustContain(t, "delete --with-output", out, "pyjob/hello deleted", "persistentvolumeclaim/"+claim+" deleted")
		testenv.EventuallyWithin(t, timeout, func() error {
			err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: claim}, &corev1.PersistentVolumeClaim{})
			if err == nil {
				return fmt.Errorf("claim %s still there", claim)
			}
			return client.IgnoreNotFound(err)
		})
	})
}

// screen is a command running on a pseudo-terminal, and what it has drawn.
type screen struct {
	cmd  *exec.Cmd
	tty  *os.File
	seen testenv.SyncBuffer
	done chan error
	read chan struct{} // closed once everything the command wrote was read
}

// terminal starts the command on a pseudo-terminal, as a user at a terminal runs it; it is
// stopped and the terminal closed when the test ends.
func (k kubectlKiln) terminal(t *testing.T, args ...string) *screen {
	t.Helper()
	cmd := k.command(context.Background(), args...)
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 200})
	if err != nil {
		t.Fatalf("starting kubectl kiln %s on a terminal: %v", strings.Join(args, " "), err)
	}
	s := &screen{cmd: cmd, tty: tty, done: make(chan error, 1), read: make(chan struct{})}
	go func() {
		defer close(s.read)
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			_, _ = s.seen.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	go func() { s.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
		_ = tty.Close()
	})
	return s
}

func (s *screen) text() string { return s.seen.String() }

// await waits until what the screen shows satisfies ok.
func (s *screen) await(t *testing.T, what string, ok func(string) bool) {
	t.Helper()
	testenv.EventuallyWithin(t, timeout, func() error {
		if !ok(s.text()) {
			return fmt.Errorf("the terminal does not show %s yet:\n%q", what, s.text())
		}
		return nil
	})
}

// interrupt types Ctrl-C and returns the command's exit code.
func (s *screen) interrupt(t *testing.T) int {
	t.Helper()
	if _, err := s.tty.Write([]byte{3}); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-s.done:
	case <-time.After(timeout):
		t.Fatalf("Ctrl-C did not stop the command:\n%q", s.text())
	}
	select { // the terminal's last lines
	case <-s.read:
	case <-time.After(timeout):
		t.Fatalf("the terminal was not read to its end:\n%q", s.text())
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return 0
}

// On a terminal, get -w redraws its table in place and run --follow keeps a progress line under
// the log; Ctrl-C leaves the run going and says how to follow it again.
func TestKubectlKilnOnATerminal(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	kk := newKubectlKiln(t, ns)
	create(t, builder.PyTorchJob("pt", ns).Replicas("Master", 1).Replicas("Worker", 1).
		Annotate("Master", duration, "1h").Annotate("Worker", duration, "1h").Obj())

	get := kk.terminal(t, "get", "-w")
	const redraw = "\x1b[H\x1b[2J"
	get.await(t, "the table drawn three times in place", func(s string) bool {
		return strings.Count(s, redraw) >= 3 && strings.Contains(s[strings.LastIndex(s, redraw):], "PyTorchJob")
	})
	if code := get.interrupt(t); code != 0 {
		t.Errorf("get -w: exit %d after Ctrl-C, want 0", code)
	}

	script := filepath.Join(t.TempDir(), "train.py")
	if err := os.WriteFile(script, []byte("print('training')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := kk.terminal(t, "run", script, "--name", "long", "--annotation", duration+"=1h", "--follow")
	const progress = "\r\x1b[Kpyjob/long: Running, 1 running, 0 succeeded of 1, "
	run.await(t, "the log, and the progress line redrawn under it", func(s string) bool {
		return strings.Contains(s, "[worker-0] saved the model") && strings.Count(s, progress) >= 3
	})
	if code := run.interrupt(t); code != 130 {
		t.Errorf("run --follow: exit %d after Ctrl-C, want 130", code)
	}
	mustContain(t, "run --follow after Ctrl-C", run.text(), "pyjob/long keeps running", "kubectl kiln logs pyjob/long -n "+ns+" -f")
	waitPhase(t, &trainingv1alpha1.PyJob{ObjectMeta: metav1.ObjectMeta{Name: "long", Namespace: ns}}, trainingv1alpha1.PyJobRunning)
}
