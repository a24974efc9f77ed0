// Package testenv starts the real kube-apiserver and etcd (built by hack/tools.sh) with kiln's
// CRDs installed, runs kiln's manager against them, and plays the kubelet by writing pod status.
// Integration suites use it from TestMain; every process it starts is stopped by Stop.
package testenv

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/burst"
	"github.com/kiln-ml/kiln/internal/manager"
	"github.com/kiln-ml/kiln/internal/replicajob"
	"github.com/kiln-ml/kiln/internal/version"
)

// Timeouts of the suites: how long a reconcile-driven change may take to show, and how long to
// watch that something does not happen.
const (
	Timeout  = 20 * time.Second
	Interval = 50 * time.Millisecond
	Quiet    = 2 * time.Second
)

// toolsDir is where hack/tools.sh put the binaries (KUBEBUILDER_ASSETS as the suite found it).
var toolsDir string

// toolsEnv keeps toolsDir for the processes a suite starts.
const toolsEnv = "KILN_ENVTEST_TOOLS"

// Env is a running control plane.
type Env struct {
	env *envtest.Environment
	// dir is the control plane's folder (planeFolder).
	dir            string
	stopConversion func()
	Config         *rest.Config
	Client         client.Client
}

// RepoRoot is the folder of kiln's go.mod.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Start starts kube-apiserver and etcd from $KUBEBUILDER_ASSETS with the CRDs of config/crd.
func Start() (*Env, error) {
	return StartWith(filepath.Join(RepoRoot(), "config", "crd", "bases"))
}

// StartWith starts kube-apiserver and etcd with the CRDs of the given folders only; with none, a
// bare apiserver.
func StartWith(crdPaths ...string) (*Env, error) { return start(nil, crdPaths...) }

// StartServingPodGroups starts the control plane of Start with kube-apiserver also serving Kubernetes'
// own gang-scheduling PodGroups (scheduling.k8s.io/v1beta1, feature gate GenericWorkload).
func StartServingPodGroups() (*Env, error) {
	return start(map[string]string{"feature-gates": "GenericWorkload=true", "runtime-config": "scheduling.k8s.io/v1beta1=true"},
		filepath.Join(RepoRoot(), "config", "crd", "bases"))
}

// controlPlaneStartTimeout bounds the start of etcd and kube-apiserver, each.
const controlPlaneStartTimeout = 2 * time.Minute

func start(apiserverArgs map[string]string, crdPaths ...string) (*Env, error) {
	// A suite points KUBEBUILDER_ASSETS at its wrappers below; the processes it starts (go test's
	// fuzz workers, which run TestMain again) find the tools' folder in toolsEnv.
	assets := os.Getenv(toolsEnv)
	if assets == "" {
		assets = os.Getenv("KUBEBUILDER_ASSETS")
		os.Setenv(toolsEnv, assets)
	}
	if assets == "" {
		return nil, fmt.Errorf("KUBEBUILDER_ASSETS is not set: run the tests with `make test`, or export KUBEBUILDER_ASSETS=$(bash hack/tools.sh envtest)")
	}
	ctrl.SetLogger(Logger())
	dir, err := planeFolder()
	if err != nil {
		return nil, err
	}
	bin, err := tiedToThisProcess(dir, assets, "etcd", "kube-apiserver")
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	// envtest prefers KUBEBUILDER_ASSETS over BinaryAssetsDirectory: point it at the wrappers.
	toolsDir = assets
	os.Setenv("KUBEBUILDER_ASSETS", bin)
	e := &envtest.Environment{
		BinaryAssetsDirectory: bin,
		CRDDirectoryPaths:     crdPaths,
		ErrorIfCRDPathMissing: true,
		// envtest's 20 s was too short for go test's fuzz workers, which each start a control
		// plane of their own at once under a loaded make test: a fresh machine's worker died
		// before fuzzing ("fuzzing process terminated without fuzzing: EOF" after 19.5 s).
		ControlPlaneStartTimeout: controlPlaneStartTimeout,
		// So was its 10 s for the CRDs to be established, it seems: a worker died about 24 s
		// after it started, its control plane taking 16 s to come up with the CRDs in a run
		// that passed (the worker's own output goes nowhere: fuzzWorkerOutput).
		CRDInstallOptions: envtest.CRDInstallOptions{MaxTime: controlPlaneStartTimeout},
		Scheme:            manager.Scheme(), // its convertible kinds' CRDs get serveConversion's webhook
	}
	// etcd's data and the apiserver's certificates go in the plane's folder, not in folders of
	// envtest's own that only its Stop removes.
	e.ControlPlane.Etcd = &envtest.Etcd{DataDir: filepath.Join(dir, "etcd")}
	e.ControlPlane.GetAPIServer().CertDir = filepath.Join(dir, "apiserver")
	for _, d := range []string{e.ControlPlane.Etcd.DataDir, e.ControlPlane.GetAPIServer().CertDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	for k, v := range apiserverArgs {
		e.ControlPlane.GetAPIServer().Configure().Set(k, v)
	}
	env := &Env{env: e, dir: dir}
	if env.Config, err = e.Start(); err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", assets, err)
	}
	env.Config.QPS, env.Config.Burst = -1, 0
	if env.Client, err = client.New(env.Config, client.Options{Scheme: manager.Scheme()}); err != nil {
		_ = env.Stop()
		return nil, err
	}
	if env.stopConversion, err = serveConversion(e.WebhookInstallOptions); err != nil {
		_ = env.Stop()
		return nil, err
	}
	return env, nil
}

// planePrefix begins the name of each test process's control-plane folder:
// <TMPDIR>/kiln-envtest-<pid>-<random>.
const planePrefix = "kiln-envtest-"

// planeFolder makes this process's control-plane folder — the binaries' wrappers, etcd's data
// (about 130 MB), the apiserver's certificates — which Stop removes. A process killed before its
// Stop ends leaves its folder behind: go test's fuzz coordinator kills a worker a second after
// asking it to stop (each make test left 16 such folders of envtest's, 2 GB, in the fuzz
// targets' minutes), and a go test timeout kills the test binary. So each new one first removes
// the folders of processes that no longer run (removeEndedPlanes), as does a suite at its end:
// the fuzzing process outlives its workers.
func planeFolder() (string, error) {
	removeEndedPlanes()
	return os.MkdirTemp("", fmt.Sprintf("%s%d-", planePrefix, os.Getpid()))
}

// removeEndedPlanes removes the control-plane folders of test processes that no longer run.
func removeEndedPlanes() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), planePrefix+"*"))
	for _, d := range dirs {
		pid, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(d), planePrefix), "-")
		if n, err := strconv.Atoi(pid); err == nil && n > 0 && errors.Is(syscall.Kill(n, 0), syscall.ESRCH) {
			_ = os.RemoveAll(d)
		}
	}
}

// tiedToThisProcess makes, in dir, a folder of wrappers that start each binary with a
// parent-death signal, so the kernel kills etcd and kube-apiserver when the test process dies,
// even of a panic or a go test timeout, which skip every deferred clean-up.
func tiedToThisProcess(dir, tools string, names ...string) (string, error) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		return "", fmt.Errorf("setpriv (Debian package util-linux) is needed to tie the control plane to the test process: %w", err)
	}
	wrappers := filepath.Join(dir, "bin")
	if err := os.Mkdir(wrappers, 0o755); err != nil {
		return "", err
	}
	for _, n := range names {
		script := fmt.Sprintf("#!/bin/sh\nexec %s --pdeathsig KILL -- %s \"$@\"\n", setpriv, filepath.Join(tools, n))
		if err := os.WriteFile(filepath.Join(wrappers, n), []byte(script), 0o755); err != nil {
			return "", err
		}
	}
	return wrappers, nil
}

// Kubeconfig writes a kubeconfig of a cluster admin for processes the test starts.
func (e *Env) Kubeconfig(t testing.TB) string {
	t.Helper()
	user, err := e.env.ControlPlane.AddUser(envtest.User{Name: "kiln-test-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// BuildKiln builds the kiln binary into a temporary folder and returns its path.
func BuildKiln(t testing.TB) string {
	t.Helper()
	return BuildCommand(t, "kiln")
}

// BuildCommand builds the binary of cmd/<name> into a temporary folder and returns its path.
func BuildCommand(t testing.TB, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	if err := Build(name, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// Build builds the binary of cmd/<name> to the file out as the image and make build do
// (version.GoBuild), so tests run what ships.
func Build(name, out string) error {
	cmd := version.GoBuild("-o", out, "./cmd/"+name)
	cmd.Dir = RepoRoot()
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %w\n%s", name, err, output)
	}
	return nil
}

// InstallCRDs installs the CRDs of the given files or folders and waits until they are served.
func (e *Env) InstallCRDs(t testing.TB, paths ...string) {
	t.Helper()
	if _, err := envtest.InstallCRDs(e.Config, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true}); err != nil {
		t.Fatalf("installing CRDs from %v: %v", paths, err)
	}
}

// GatewayAPICRDs is the folder of the Gateway API CRDs hack/tools.sh copied next to the binaries.
func GatewayAPICRDs(t testing.TB) string {
	t.Helper()
	return toolCRDs(t, "gateway-api")
}

// IstioCRDs is the folder of Istio's CRDs (its API release's) hack/tools.sh copied next to the
// binaries.
func IstioCRDs(t testing.TB) string {
	t.Helper()
	return toolCRDs(t, "istio")
}

// KEDACRDs is the folder of KEDA's CRDs hack/tools.sh copied next to the binaries.
func KEDACRDs(t testing.TB) string {
	t.Helper()
	return toolCRDs(t, "keda")
}

// JobSetCRDs is the folder of JobSet's CRD hack/tools.sh copied next to the binaries.
func JobSetCRDs(t testing.TB) string {
	t.Helper()
	return toolCRDs(t, "jobset")
}

// TrainerRuntimes is the folder of Kubeflow Trainer's own runtime manifests (its
// manifests/base/runtimes) hack/tools.sh copied next to the binaries.
func TrainerRuntimes(t testing.TB) string {
	t.Helper()
	dir, err := toolFolder("trainer-*", "runtimes")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func toolCRDs(t testing.TB, project string) string {
	t.Helper()
	dir, err := toolFolder("crds", project+"-*")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// toolFolder is the folder of the tools' cache that matches the glob of parts.
func toolFolder(parts ...string) (string, error) {
	for _, root := range []string{os.Getenv("KILN_TOOLS_DIR"), toolsDir, os.Getenv(toolsEnv)} {
		if root == "" {
			continue
		}
		if dirs, _ := filepath.Glob(filepath.Join(append([]string{root}, parts...)...)); len(dirs) > 0 {
			return dirs[0], nil
		}
	}
	return "", fmt.Errorf("no %s next to the tools: run `bash hack/tools.sh envtest`", filepath.Join(parts...))
}

// StartWithJobSet is Start with JobSet's CRD installed too: kiln makes TrainJobs' JobSets.
func StartWithJobSet() (*Env, error) {
	e, err := Start()
	if err != nil {
		return nil, err
	}
	if err := e.InstallJobSetCRD(); err != nil {
		_ = e.Stop()
		return nil, err
	}
	return e, nil
}

// InstallJobSetCRD installs JobSet's CRD (hack/tools.sh copied it next to the binaries).
func (e *Env) InstallJobSetCRD() error {
	dir, err := toolFolder("crds", "jobset-*")
	if err == nil {
		_, err = envtest.InstallCRDs(e.Config, envtest.CRDInstallOptions{Paths: []string{dir}, ErrorIfPathMissing: true})
	}
	if err != nil {
		return fmt.Errorf("installing JobSet's CRD: %w", err)
	}
	return nil
}

// RunWithJobSet is Run on StartWithJobSet's control plane.
func RunWithJobSet(m *testing.M, env **Env, setup func(*Env) (stop func(), err error)) int {
	return run(m, env, StartWithJobSet, setup)
}

// Stop stops the control plane.
func (e *Env) Stop() error {
	defer os.RemoveAll(e.dir)
	if e.stopConversion != nil { // nil until the control plane started
		e.stopConversion()
	}
	return e.env.Stop()
}

// Run starts the suite's control plane and, when setup is given, what setup starts (kiln's
// manager), runs the tests and stops everything, whatever the outcome.
func Run(m *testing.M, env **Env, setup func(*Env) (stop func(), err error)) int {
	return run(m, env, Start, setup)
}

// RunServingPodGroups is Run on StartServingPodGroups' control plane.
func RunServingPodGroups(m *testing.M, env **Env, setup func(*Env) (stop func(), err error)) int {
	return run(m, env, StartServingPodGroups, setup)
}

// RunBare runs the tests against a bare control plane: no CRDs, no manager.
func RunBare(m *testing.M, env **Env) int {
	return run(m, env, func() (*Env, error) { return StartWith() }, nil)
}

func run(m *testing.M, env **Env, start func() (*Env, error), setup func(*Env) (stop func(), err error)) int {
	if err := fuzzWorkerOutput(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	e, err := start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*env = e
	defer removeEndedPlanes() // after stopPlane: a fuzzing process's workers have ended
	stopPlane := OnInterrupt(func() {
		if err := e.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
	})
	defer stopPlane()
	if setup != nil {
		stop, err := setup(e)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer stop()
	}
	return m.Run()
}

// FuzzWorkerLogEnv names the file a fuzz worker writes its output to (hack/fuzz.sh sets it, and
// prints the file when a target fails).
const FuzzWorkerLogEnv = "KILN_FUZZ_WORKER_LOG"

// fuzzWorkerOutput sends the output of a fuzz worker — go test runs the test binary again for
// each, and discards what it prints — to the file FuzzWorkerLogEnv names, so that a worker that
// dies before fuzzing (its control plane not starting, a failed setup) says why somewhere. The
// worker talks to go test over other pipes, not its standard output. Nothing to do in any other
// process, or without the variable.
func fuzzWorkerOutput() error {
	path := os.Getenv(FuzzWorkerLogEnv)
	if path == "" || !slices.Contains(os.Args[1:], "-test.fuzzworker") {
		return nil
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("opening the fuzz workers' log %s: %w", path, err)
	}
	defer f.Close() // the descriptors below are duplicates
	fmt.Fprintf(f, "fuzz worker %d (%s) starts at %s\n", os.Getpid(), strings.Join(os.Args[1:], " "), time.Now().Format(time.RFC3339))
	for _, fd := range []int{1, 2} {
		if err := syscall.Dup3(int(f.Fd()), fd, 0); err != nil {
			return fmt.Errorf("sending the fuzz worker's output to %s: %w", path, err)
		}
	}
	return nil
}

// OnInterrupt makes teardown run once: when the returned function is called (defer it) or on
// Ctrl-C or SIGTERM (go test's own), after which the process exits. An interrupted run must not
// leave processes behind.
func OnInterrupt(teardown func()) func() {
	once := sync.OnceFunc(teardown)
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		if _, ok := <-signals; ok {
			once()
			os.Exit(130)
		}
	}()
	return func() {
		signal.Stop(signals)
		once()
	}
}

// ManagerOptions are the options the suites run kiln with: no metrics or probe listeners,
// several workers, the default clean-pod policy and burst hold of a production install.
func ManagerOptions() manager.Options {
	return manager.Options{
		MetricsAddr: "0", ProbeAddr: "0", Workers: 4, SkipNameValidation: true,
		Engine: replicajob.Options{DefaultCleanPodPolicy: kubeflowv1.CleanPodPolicyRunning, Parallelism: 16, StatusInterval: time.Second, ChildEventBatch: replicajob.DefaultChildEventBatch,
			Burst: burst.New(burst.DefaultMaxHold, clock.RealClock{})},
	}
}

// StartManager runs kiln's manager until the returned stop function is called; stop waits for it
// to exit.
func (e *Env) StartManager(o manager.Options) (stop func(), err error) {
	_, stop, err = e.StartManagerFor(o)
	return stop, err
}

// StartManagerFor is StartManager that also returns the manager, for tests that look into it.
func (e *Env) StartManagerFor(o manager.Options) (ctrl.Manager, func(), error) {
	mgr, err := manager.New(e.Config, o)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return mgr, func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "manager stopped with:", err)
		}
	}, nil
}

// Namespace creates a namespace for one test. It goes with the control plane: envtest has no
// namespace controller to finish deleting it anyway.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "kiln-test-"}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	return ns.Name
}

// Logger logs errors only (a passing suite prints nothing), everything with KILN_TEST_VERBOSE set.
func Logger() logr.Logger { return zap.New(zap.WriteTo(os.Stderr), zap.Level(zapLevel())) }

func zapLevel() zapcore.Level {
	if os.Getenv("KILN_TEST_VERBOSE") != "" {
		return -4
	}
	return 2 // errors only: a passing suite prints nothing
}

// NegotiatedProtocol is what a TLS server at addr agrees to speak when offered HTTP/2 and
// HTTP/1.1 (ALPN): "h2" or "http/1.1".
func NegotiatedProtocol(t testing.TB, addr string) string {
	t.Helper()
	var proto string
	Eventually(t, func() error {
		conn, err := tls.Dial("tcp", addr, &tls.Config{NextProtos: []string{"h2", "http/1.1"}, InsecureSkipVerify: true}) //nolint:gosec // only the protocol is looked at
		if err != nil {
			return err
		}
		defer conn.Close()
		proto = conn.ConnectionState().NegotiatedProtocol
		return nil
	})
	return proto
}
