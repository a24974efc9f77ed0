package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kiln-ml/kiln/internal/devcluster"
	"github.com/kiln-ml/kiln/internal/manager"
	"github.com/kiln-ml/kiln/test/testenv"
)

// ManagerStats is what the kiln manager process cost.
type ManagerStats struct {
	// CPUSeconds is the process's CPU from its start; StartCPUSeconds of it until it was ready
	// (loading the API groups, starting and syncing its informers), before the first job.
	CPUSeconds      float64 `json:"cpuSeconds"`
	StartCPUSeconds float64 `json:"startCPUSeconds"`
	PeakRSSMiB      float64 `json:"peakRSSMiB"`
	// Requests are the manager's API requests by HTTP method; Writes its POST, PUT, PATCH and
	// DELETE requests by resource (kiln_api_requests_total), and per replica (pod of the workload):
	// all of them, and those every job needs (creating its pods and services, status patches),
	// leaving out events and the deletions cleanPodPolicy asks for.
	Requests                   map[string]int `json:"requests"`
	Writes                     map[string]int `json:"writesByResource"`
	WritesPerReplica           float64        `json:"writesPerReplica"`
	CreatesAndStatusPerReplica float64        `json:"createsAndStatusPerReplica"`
	// WebhookSeconds are the seconds kiln's webhook handlers took, by path
	// (controller_runtime_webhook_latency_seconds): the rest of the apiserver's wait on them is
	// spent in the apiserver and on the connection, not in kiln.
	WebhookSeconds map[string]float64 `json:"webhookSeconds,omitempty"`
	// Reconciles are the reconciles each controller ran (controller_runtime_reconcile_total).
	Reconciles map[string]int `json:"reconciles,omitempty"`
}

// managerProcess is `kiln manager` started as users run it, with its admission webhooks.
type managerProcess struct {
	cmd                 *exec.Cmd
	metrics, pprof, dir string
	exited              chan error
	stopped             bool
	startCPU            float64       // CPU seconds when it was ready
	profiling           chan struct{} // closed when the CPU profile is saved (profile)
}

// kubeconfig says who it runs as (kubeconfigAs); profiled serves its net/http/pprof (profile,
// heapProfile); env is extra environment for the manager ("GOGC=100 GOMAXPROCS=2"), added to the
// benchmark's; args are further flags.
func startManager(ctx context.Context, cluster *devcluster.Cluster, kubeconfig, tools, dir string, webhooks, profiled bool, env string, args ...string) (*managerProcess, error) {
	bin := filepath.Join(testenv.RepoRoot(), "bin", "kiln")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s is missing: `make bench` builds it (make build)", bin)
	}
	var addrs [4]string
	for i := range addrs {
		a, err := devcluster.FreeAddr()
		if err != nil {
			return nil, err
		}
		addrs[i] = a
	}
	webhook, metrics, probe, pprof := addrs[0], addrs[1], addrs[2], addrs[3]
	opts, err := devcluster.LocalWebhooks(manager.Options{}, webhook, time.Minute)
	if err != nil {
		return nil, err
	}
	if webhooks {
		if err := devcluster.InstallWebhooks(ctx, cluster.Client, opts); err != nil {
			return nil, err
		}
	} else {
		opts.Webhook.Port = 0
	}
	if err := dropFromPageCache(bin); err != nil {
		return nil, err
	}
	logs, err := os.Create(filepath.Join(dir, "manager.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "manager", "--kubeconfig", kubeconfig,
		"--metrics-bind-address", metrics, "--health-probe-bind-address", probe,
		"--webhook-port", strconv.Itoa(opts.Webhook.Port), "--webhook-namespace", opts.Webhook.Namespace,
		"--webhook-hosts", opts.Webhook.Host)
	if profiled {
		cmd.Args = append(cmd.Args, "--pprof-bind-address", pprof)
	}
	cmd.Args = append(cmd.Args, args...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if env != "" {
		cmd.Env = append(os.Environ(), strings.Fields(env)...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	m := &managerProcess{cmd: cmd, metrics: metrics, pprof: pprof, dir: dir, exited: make(chan error, 1)}
	go func() { m.exited <- cmd.Wait(); logs.Close() }()
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get("http://" + probe + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-m.exited:
			return nil, fmt.Errorf("kiln manager exited: %v (see %s)", err, logs.Name())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			m.stop()
			return nil, fmt.Errorf("kiln manager not ready after a minute (see %s)", logs.Name())
		}
	}
	// Without webhooks (WEBHOOKS=0) there is nothing to wait for: kiln watches each kind at its
	// stored version, and the benchmark writes no other, so nothing needs converting either.
	if webhooks {
		if err := devcluster.WaitForWebhooks(ctx, cluster.Client, time.Minute); err != nil {
			m.stop()
			return nil, err
		}
	}
	if m.startCPU, err = cpuSeconds(cmd.Process.Pid); err != nil {
		m.stop()
		return nil, err
	}
	return m, nil
}

// stop sends SIGTERM and waits for a graceful exit (killing it after 30 s).
func (m *managerProcess) stop() {
	if m.stopped {
		return
	}
	m.stopped = true
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(30 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.exited
	}
}

// stats reads the process's CPU time and peak RSS from /proc, and its requests from /metrics.
func (m *managerProcess) stats(pods int) (*ManagerStats, error) {
	pid := m.cmd.Process.Pid
	cpu, err := cpuSeconds(pid)
	if err != nil {
		return nil, err
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	var hwmKiB float64
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			hwmKiB, _ = strconv.ParseFloat(strings.Fields(line)[1], 64)
		}
	}
	requests, writes, webhooks, reconciles, err := m.requests()
	if err != nil {
		return nil, err
	}
	total, createsAndStatus := 0, 0
	for key, n := range writes {
		total += n
		if key == "POST pods" || key == "POST services" || strings.HasPrefix(key, http.MethodPatch+" ") && strings.HasSuffix(key, "/status") {
			createsAndStatus += n
		}
	}
	return &ManagerStats{
		CPUSeconds: cpu, StartCPUSeconds: m.startCPU,
		PeakRSSMiB: hwmKiB / 1024, Requests: requests, Writes: writes,
		WritesPerReplica:           float64(total) / float64(pods),
		CreatesAndStatusPerReplica: float64(createsAndStatus) / float64(pods),
		WebhookSeconds:             webhooks,
		Reconciles:                 reconciles,
	}, nil
}

// requests reads the manager's requests by method, its writes by resource, its webhook
// handlers' seconds by path and its reconciles by controller.
func (m *managerProcess) requests() (byMethod, writes map[string]int, webhooks map[string]float64, reconciles map[string]int, err error) {
	families, err := testenv.Metrics(m.metrics)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	byMethod, writes, webhooks, reconciles = map[string]int{}, map[string]int{}, map[string]float64{}, map[string]int{}
	for _, m := range families["kiln_api_requests_total"].GetMetric() {
		n, method := int(m.GetCounter().GetValue()), testenv.Label(m, "method")
		byMethod[method] += n
		switch method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			writes[method+" "+testenv.Label(m, "resource")] += n
		}
	}
	for _, m := range families["controller_runtime_webhook_latency_seconds"].GetMetric() {
		webhooks[testenv.Label(m, "webhook")] += m.GetHistogram().GetSampleSum()
	}
	for _, m := range families["controller_runtime_reconcile_total"].GetMetric() {
		if n := int(m.GetCounter().GetValue()); n > 0 {
			reconciles[testenv.Label(m, "controller")] += n
		}
	}
	return byMethod, writes, webhooks, reconciles, nil
}

// dropFromPageCache drops the file bin from the page cache, so that every operator a run compares
// starts as from a node's disk: KServe's controller, just written by the linker, kept 65.5 MiB of
// its file resident in a J=200 run, and 55.3 MiB when read back from disk (docs/performance.md).
func dropFromPageCache(bin string) error {
	f, err := os.Open(bin)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil { // pages not yet written back cannot be dropped
		return fmt.Errorf("writing %s back before dropping it from the page cache: %w", bin, err)
	}
	const dontNeed = 4 // POSIX_FADV_DONTNEED
	if _, _, errno := syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), 0, 0, dontNeed, 0, 0); errno != 0 {
		return fmt.Errorf("dropping %s from the page cache: %w", bin, errno)
	}
	return nil
}

// profile starts saving a CPU profile of the next d.
func (m *managerProcess) profile(d time.Duration) {
	m.profiling = make(chan struct{})
	go func() {
		defer close(m.profiling)
		m.save(fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(d.Seconds())), "cpu.pprof", d+time.Minute)
	}()
}

// heapProfile saves the live heap, once the CPU profile (if any) has ended: a PROFILE longer
// than the run covers all of it, the manager idle after what was measured.
func (m *managerProcess) heapProfile() {
	if m.profiling != nil {
		<-m.profiling
	}
	m.save("/debug/pprof/heap", "heap.pprof", time.Minute)
}

func (m *managerProcess) save(path, file string, timeout time.Duration) {
	c := &http.Client{Timeout: timeout}
	resp, err := c.Get("http://" + m.pprof + path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "profiling the manager:", err)
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(filepath.Join(m.dir, file))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	defer f.Close()
	_, _ = io.Copy(f, resp.Body)
}
