package testenv

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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// KubeletAnnotation on a pod ("test") makes kwok leave it to the test (the stage in
// testdata/kubelet-stage.yaml, which a cluster that uses StartKubelet must load).
const KubeletAnnotation = "kiln.dev/kubelet"

// KubeletStage is the kwok stage file StartKubelet needs.
func KubeletStage() string {
	return filepath.Join(RepoRoot(), "test", "testenv", "testdata", "kubelet-stage.yaml")
}

// Kubelet is the test playing the kubelet of the pods of one namespace that carry
// KubeletAnnotation, wherever the scheduler placed them: the pods' init containers run for real,
// as processes on this machine, and only then are their containers reported running and ready.
// kwok skips init containers, so this is how an e2e test runs kiln-fetch against a real storage
// server.
//
// Each init container runs once: the binary Binaries names for its command, its env and envFrom
// (Secrets and ConfigMaps read from the cluster) as its environment, and each volume mount's path
// in its args replaced by a folder of the test. A failed one is reported as the kubelet reports an
// init container in back-off (lastState terminated, its output's tail as the message, as
// terminationMessagePolicy FallbackToLogsOnError gives); it is not run again. Deleted pods are
// kwok's again.
type Kubelet struct {
	Namespace string
	// Binaries maps an init container's command (e.g. "/kiln-fetch") to the binary to run.
	Binaries map[string]string

	env     *Env
	dir     string
	mu      sync.Mutex
	volumes map[string]string // "<pod uid>/<volume>" → folder
}

// StartKubelet plays the kubelet of ns's annotated pods until the test ends.
func (e *Env) StartKubelet(t *testing.T, ns string, binaries map[string]string) *Kubelet {
	k := &Kubelet{Namespace: ns, Binaries: binaries, env: e, dir: t.TempDir(), volumes: map[string]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ; ctx.Err() == nil; sleep(ctx, 300*time.Millisecond) {
			if err := k.syncPods(ctx); err != nil && ctx.Err() == nil {
				t.Logf("kubelet of %s: %v", ns, err)
			}
		}
	}()
	return k
}

// Volume is the folder that stands for a pod's volume, "" before its init containers ran.
func (k *Kubelet) Volume(pod *corev1.Pod, volume string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.volumes[string(pod.UID)+"/"+volume]
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// syncPods starts the scheduled pods that have no status yet.
func (k *Kubelet) syncPods(ctx context.Context) error {
	var pods corev1.PodList
	if err := k.env.Client.List(ctx, &pods, client.InNamespace(k.Namespace)); err != nil {
		return err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Annotations[KubeletAnnotation] == "test" && p.DeletionTimestamp == nil && p.Spec.NodeName != "" &&
			len(p.Status.InitContainerStatuses)+len(p.Status.ContainerStatuses) == 0 {
			if err := k.start(ctx, p); err != nil {
				return fmt.Errorf("pod %s: %w", p.Name, err)
			}
		}
	}
	return nil
}

// start runs the pod's init containers in order and writes the pod's status.
func (k *Kubelet) start(ctx context.Context, p *corev1.Pod) error {
	var inits []corev1.ContainerStatus
	failed := false
	for _, ic := range p.Spec.InitContainers {
		s := corev1.ContainerStatus{Name: ic.Name, Image: ic.Image}
		if failed {
			s.State.Waiting = &corev1.ContainerStateWaiting{Reason: "PodInitializing"}
			inits = append(inits, s)
			continue
		}
		out, code, err := k.run(ctx, p, ic)
		if err != nil {
			return err
		}
		done := &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Completed", StartedAt: metav1.Now(), FinishedAt: metav1.Now()}
		if code == 0 {
			s.State.Terminated, s.Ready = done, true
		} else {
			failed = true
			done.Reason, done.Message = "Error", Tail(out, 80, 2048)
			s.LastTerminationState.Terminated, s.RestartCount = done, 1
			s.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
				Message: fmt.Sprintf("back-off 10s restarting failed container=%s pod=%s", ic.Name, p.Name)}
		}
		inits = append(inits, s)
	}
	now := metav1.Now()
	condition := func(t corev1.PodConditionType, ok bool, reason string) corev1.PodCondition {
		c := corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now}
		if !ok {
			c.Status, c.Reason = corev1.ConditionFalse, reason
		}
		return c
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, HostIP: "127.0.0.1", PodIP: "127.0.0.1", StartTime: &now,
		InitContainerStatuses: inits, Conditions: []corev1.PodCondition{
			condition(corev1.PodScheduled, true, ""),
			condition(corev1.PodInitialized, !failed, "ContainersNotInitialized"),
			condition(corev1.ContainersReady, !failed, "PodInitializing"),
			condition(corev1.PodReady, !failed, "PodInitializing"),
		}}
	for _, c := range p.Spec.Containers {
		s := corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: !failed, Started: ptr.To(!failed)}
		if failed {
			p.Status.Phase = corev1.PodPending
			s.State.Waiting = &corev1.ContainerStateWaiting{Reason: "PodInitializing"}
		} else {
			s.State.Running = &corev1.ContainerStateRunning{StartedAt: now}
		}
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, s)
	}
	return k.env.Client.Status().Update(ctx, p)
}

// run runs one init container as a process and returns its output and exit code.
func (k *Kubelet) run(ctx context.Context, p *corev1.Pod, c corev1.Container) (string, int32, error) {
	if len(c.Command) == 0 || k.Binaries[c.Command[0]] == "" {
		return "", 0, fmt.Errorf("init container %s runs %q, which this node has no binary for", c.Name, c.Command)
	}
	args := append(append([]string{}, c.Command[1:]...), c.Args...)
	rewritten := make([]bool, len(args)) // once: a folder of the test may lie under another mount's path (/tmp)
	for _, m := range c.VolumeMounts {
		dir, err := k.volume(p, m.Name)
		if err != nil {
			return "", 0, err
		}
		for i, a := range args {
			if !rewritten[i] && (a == m.MountPath || strings.HasPrefix(a, m.MountPath+"/")) {
				args[i], rewritten[i] = dir+strings.TrimPrefix(a, m.MountPath), true
			}
		}
	}
	env, err := k.environment(ctx, p.Namespace, c)
	if err != nil {
		return "", 0, err
	}
	cmd := exec.CommandContext(ctx, k.Binaries[c.Command[0]], args...)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if exit, ok := err.(*exec.ExitError); ok {
			return out.String(), int32(exit.ExitCode()), nil
		}
		return "", 0, err
	}
	return out.String(), 0, nil
}

// volume is the folder standing for a pod's volume, made on first use.
func (k *Kubelet) volume(p *corev1.Pod, name string) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	key := string(p.UID) + "/" + name
	if dir, ok := k.volumes[key]; ok {
		return dir, nil
	}
	dir := filepath.Join(k.dir, string(p.UID), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	k.volumes[key] = dir
	return dir, nil
}

// environment is a container's environment as the kubelet gives it: envFrom's Secrets and
// ConfigMaps, then env's values (a missing Secret or ConfigMap is an error, as it stops a
// kubelet). Only PATH and HOME come from the test's own environment.
func (k *Kubelet) environment(ctx context.Context, ns string, c corev1.Container) ([]string, error) {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + k.dir}
	for _, from := range c.EnvFrom {
		data := map[string]string{}
		switch {
		case from.SecretRef != nil:
			var s corev1.Secret
			if err := k.env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: from.SecretRef.Name}, &s); err != nil {
				return nil, err
			}
			for k, v := range s.Data {
				data[k] = string(v)
			}
		case from.ConfigMapRef != nil:
			var cm corev1.ConfigMap
			if err := k.env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: from.ConfigMapRef.Name}, &cm); err != nil {
				return nil, err
			}
			data = cm.Data
		}
		for k, v := range data {
			env = append(env, from.Prefix+k+"="+v)
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env = append(env, e.Name+"="+e.Value)
		}
	}
	return env, nil
}

// Tail is the last lines of out, at most max bytes: a failed container's message when it wrote no
// termination message file, or where a failed build says why.
func Tail(out string, lines, max int) string {
	ls := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	s := strings.Join(ls, "\n")
	if len(s) > max {
		s = s[len(s)-max:]
	}
	return s
}
