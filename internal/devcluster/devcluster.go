// Package devcluster runs a real local Kubernetes control plane for `make run`, the end-to-end
// suite and the benchmark: kube-apiserver, etcd, kube-scheduler and kube-controller-manager as
// processes started by kwokctl's binary runtime, with kwok playing the kubelets of fake nodes.
// The binaries come from hack/tools.sh; nothing is downloaded.
package devcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options describe the cluster to create.
type Options struct {
	// Name of the kwok cluster; also the folder of its state under WorkDir.
	Name string
	// ToolsDir holds the binaries hack/tools.sh built, and their stages/ folder.
	ToolsDir string
	// WorkDir is where kwokctl keeps clusters (KWOK_WORKDIR); default ~/.cache/kiln/kwok.
	WorkDir string
	// Stages are extra kwok Stage files (kiln's simulated training: config/dev/stages.yaml).
	Stages []string
	// Nodes is the number of CPU nodes; GPUNodes nodes also carry GPUsPerNode nvidia.com/gpu.
	Nodes, GPUNodes, GPUsPerNode int
	// GangScheduling serves Kubernetes' own PodGroups (scheduling.k8s.io/v1beta1, feature gate
	// GenericWorkload) and has the scheduler place their pods all-or-nothing.
	GangScheduling bool
	// PriorityAndFairness serves requests under API Priority and Fairness with kube-apiserver's
	// default concurrency (400 + 200 seats), as a cluster does. Without it, as kwokctl's
	// --disable-qps-limits leaves the apiserver, it has no limit and no fairness.
	PriorityAndFairness bool
	// Log receives kwokctl's output; default io.Discard.
	Log io.Writer
}

// Cluster is a running local cluster.
type Cluster struct {
	Name string
	// Kubeconfig is the path of the cluster's kubeconfig file.
	Kubeconfig string
	Config     *rest.Config
	Client     client.Client
	opts       Options
	jobSet     *Process // JobSet's controller, once StartJobSet ran
	logsConfig string   // the ClusterLogs kwok reads (simulatedLogs)
}

// DefaultWorkDir is where clusters live unless Options.WorkDir says otherwise.
func DefaultWorkDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "kiln", "kwok")
}

// Create starts a cluster, deleting first any earlier cluster of the same name, and adds its
// nodes. On error nothing is left running.
func Create(ctx context.Context, o Options) (*Cluster, error) {
	if o.WorkDir == "" {
		o.WorkDir = DefaultWorkDir()
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	for _, bin := range []string{"kwokctl", "kwok", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if _, err := os.Stat(filepath.Join(o.ToolsDir, bin)); err != nil {
			return nil, fmt.Errorf("%s is not in %q: build the tools with `bash hack/tools.sh cluster` (the first time on a new machine takes about 25 minutes)", bin, o.ToolsDir)
		}
	}
	c := &Cluster{Name: o.Name, Kubeconfig: filepath.Join(o.WorkDir, "clusters", o.Name, "kubeconfig.yaml"), opts: o}
	_ = c.Delete() // a cluster left behind by an interrupted run
	var err error
	if c.logsConfig, err = simulatedLogs(c.logsDir(), time.Now()); err != nil {
		return nil, fmt.Errorf("writing the simulated logs: %w", err)
	}
	if err := c.create(ctx); err != nil {
		_ = c.Delete()
		return nil, fmt.Errorf("creating cluster %s: %w", o.Name, err)
	}
	if err := c.connect(); err != nil {
		_ = c.Delete()
		return nil, err
	}
	if err := c.addNodes(ctx); err != nil {
		_ = c.Delete()
		return nil, err
	}
	if err := c.addStorage(ctx); err != nil {
		_ = c.Delete()
		return nil, err
	}
	return c, nil
}

// StorageClass is the cluster's default class: no provisioner, so claims bind to the
// PersistentVolumes made up front (kube-controller-manager's binder does it without a kubelet).
const StorageClass = "standard"

// addStorage makes StorageClass the default and adds PersistentVolumes of it for claims to bind.
func (c *Cluster) addStorage(ctx context.Context) error {
	sc := &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: StorageClass, Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner: "kubernetes.io/no-provisioner",
	}
	if err := c.Client.Create(ctx, sc); err != nil {
		return fmt.Errorf("adding storage class %s: %w", StorageClass, err)
	}
	for i := range 8 {
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("kwok-pv-%d", i)},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("100Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadWriteMany},
				StorageClassName:              StorageClass,
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: fmt.Sprintf("/kwok/pv-%d", i)}},
			},
		}
		if err := c.Client.Create(ctx, pv); err != nil {
			return fmt.Errorf("adding volume %s: %w", pv.Name, err)
		}
	}
	return nil
}

// createLock is the file that makes kwokctl create run one at a time on this machine: kwokctl
// picks each cluster's ports by counting down from 32767 to the first one free, so two creating at
// once take the same, and the second cluster's apiserver or etcd cannot listen. Ports belong to
// the machine, so the lock does too: two runs with different work folders (a `make test` beside
// `make run`, or beside another clone's tests) wait for each other. A component restarting holds
// it too (RestartComponent): its ports are free while it is down.
func createLock() string { return filepath.Join(os.TempDir(), "kiln-kwokctl-create.lock") }

// lockCreates waits for createLock, at most until ctx ends, and holds it until unlock is called.
func lockCreates(ctx context.Context) (unlock func(), err error) {
	lock, err := os.OpenFile(createLock(), os.O_CREATE|os.O_RDONLY, 0o644) // flock needs no write right: every user may wait on it
	if err != nil {
		return nil, err
	}
	take := func(context.Context) (bool, error) {
		err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return false, nil
		}
		return err == nil, err
	}
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, take); err != nil {
		lock.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("waiting for %s, which another cluster's create or restart holds: %w", lock.Name(), err)
		}
		return nil, fmt.Errorf("locking %s: %w", lock.Name(), err)
	}
	return func() { lock.Close() }, nil // closing releases the lock
}

// create runs kwokctl create, one at a time on this machine (createLock).
func (c *Cluster) create(ctx context.Context) error {
	if err := os.MkdirAll(c.opts.WorkDir, 0o755); err != nil {
		return err
	}
	unlock, err := lockCreates(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return c.kwokctl(ctx, c.createArgs()...)
}

func (c *Cluster) createArgs() []string {
	t := c.opts.ToolsDir
	args := []string{"create", "cluster", "--name", c.Name, "--runtime", "binary",
		"--kube-apiserver-binary", filepath.Join(t, "kube-apiserver"),
		"--kube-controller-manager-binary", filepath.Join(t, "kube-controller-manager"),
		"--kube-scheduler-binary", filepath.Join(t, "kube-scheduler"),
		"--etcd-binary", filepath.Join(t, "etcd"),
		"--kwok-controller-binary", filepath.Join(t, "kwok"),
		"--disable-qps-limits",
		"--kubeconfig", filepath.Join(c.opts.WorkDir, "clusters", c.Name+".merged-kubeconfig"),
		// The default /24 runs out at ~250 ClusterIP services.
		"--extra-args", "kube-apiserver=service-cluster-ip-range=10.96.0.0/16",
		"--extra-args", "kube-controller-manager=service-cluster-ip-range=10.96.0.0/16",
		// On SIGTERM the apiserver answers new requests with a Retry-After until those in flight
		// are done, then gives open watches 2 s. Without it, it waits for them up to its request
		// timeout (60 s): a restarted apiserver (RestartComponent) took 30 s to stop.
		"--extra-args", "kube-apiserver=shutdown-send-retry-after=true",
		// One of each needs no leader election; with it, an apiserver away longer than the
		// renew deadline (10 s) makes them exit, and nothing here would start them again.
		"--extra-args", "kube-controller-manager=leader-elect=false",
		"--extra-args", "kube-scheduler=leader-elect=false",
		"--wait", "2m",
	}
	if c.opts.PriorityAndFairness { // after --disable-qps-limits' flags: the last one holds
		args = append(args, "--extra-args", "kube-apiserver=enable-priority-and-fairness=true",
			"--extra-args", "kube-apiserver=max-requests-inflight=400", "--extra-args", "kube-apiserver=max-mutating-requests-inflight=200")
	}
	if c.opts.GangScheduling {
		args = append(args, "--kube-feature-gates", "GenericWorkload=true", "--kube-runtime-config", "scheduling.k8s.io/v1beta1=true")
	}
	// Stages given with -c replace kwok's defaults: list the stock ones too.
	for _, s := range []string{"node-initialize", "pod-ready", "pod-complete", "pod-delete"} {
		args = append(args, "-c", filepath.Join(t, "stages", s+".yaml"))
	}
	for _, s := range c.opts.Stages {
		args = append(args, "-c", s)
	}
	if c.logsConfig != "" {
		args = append(args, "-c", c.logsConfig)
	}
	return args
}

// logsDir holds the simulated logs kwok serves for the cluster's pods.
func (c *Cluster) logsDir() string { return filepath.Join(c.opts.WorkDir, "clusters", c.Name+".logs") }

// DeleteIn deletes a cluster known only by name, with the kwokctl of toolsDir.
func (c *Cluster) DeleteIn(workDir, toolsDir string) error {
	c.opts.WorkDir, c.opts.ToolsDir, c.opts.Log = workDir, toolsDir, io.Discard
	return c.Delete()
}

// Delete stops the cluster's processes and removes its state. It is safe to call twice.
func (c *Cluster) Delete() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = os.RemoveAll(c.logsDir())
	if _, err := os.Stat(filepath.Join(c.opts.WorkDir, "clusters", c.Name)); os.IsNotExist(err) {
		return nil
	}
	err := c.kwokctl(ctx, "delete", "cluster", "--name", c.Name)
	_ = os.Remove(filepath.Join(c.opts.WorkDir, "clusters", c.Name+".merged-kubeconfig"))
	return err
}

func (c *Cluster) kwokctl(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.opts.ToolsDir, "kwokctl"), args...)
	cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+c.opts.WorkDir)
	var out strings.Builder
	cmd.Stdout = io.MultiWriter(&out, c.opts.Log)
	cmd.Stderr = cmd.Stdout
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kwokctl %s: %w\n%s", strings.Join(args[:2], " "), err, tail(out.String(), 2000))
	}
	return nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// Scheme knows the built-in kinds and CRDs (for installing them).
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = apiextensionsv1.AddToScheme(s)
	return s
}

func (c *Cluster) connect() error {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return fmt.Errorf("reading the kubeconfig of cluster %s: %w", c.Name, err)
	}
	cfg.QPS, cfg.Burst = -1, 0
	cl, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return err
	}
	c.Config, c.Client = cfg, cl
	return nil
}

// addNodes registers the fake nodes kwok plays the kubelet of: CPU nodes, then GPU nodes.
func (c *Cluster) addNodes(ctx context.Context) error {
	for i := range c.opts.Nodes + c.opts.GPUNodes {
		capacity := corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("32"),
			corev1.ResourceMemory: resource.MustParse("256Gi"),
			corev1.ResourcePods:   resource.MustParse("250"),
		}
		name, labels := fmt.Sprintf("kwok-node-%d", i), map[string]string{"type": "kwok"}
		if i >= c.opts.Nodes {
			name = fmt.Sprintf("kwok-gpu-node-%d", i-c.opts.Nodes)
			capacity["nvidia.com/gpu"] = *resource.NewQuantity(int64(c.opts.GPUsPerNode), resource.DecimalSI)
			labels["nvidia.com/gpu.present"] = "true"
		}
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
			Status:     corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
		}
		if err := c.Client.Create(ctx, node); err != nil {
			return fmt.Errorf("adding node %s: %w", name, err)
		}
	}
	return nil
}
