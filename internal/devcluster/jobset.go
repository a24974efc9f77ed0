package devcluster

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// jobSetConfig turns off what JobSet's controller does for itself in a cluster (its certificate
// management, leader election, metrics) and serves its webhooks on this machine.
const jobSetConfig = `apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
metrics:
  bindAddress: "0"
health:
  healthProbeBindAddress: %s
clientConnection:
  qps: 500
  burst: 500
`

// StartJobSet runs JobSet's controller (hack/tools.sh built it) beside the cluster, which runs a
// TrainJob's JobSet: its CRD, and its webhook configurations pointing at it by URL with a
// certificate made here, as a cluster's Service would. It returns once JobSet's webhooks answer;
// stop stops the controller (its CRD and webhooks go with the cluster). Its log is in logDir.
func (c *Cluster) StartJobSet(ctx context.Context, logDir string) (stop func(), err error) {
	bin, err := JobSetBinary(c.opts.ToolsDir)
	if err != nil {
		return nil, err
	}
	home := filepath.Dir(bin)
	crds, err := toolDir(filepath.Join(c.opts.ToolsDir, "crds"), "jobset-*")
	if err != nil {
		return nil, err
	}
	if err := InstallCRDs(ctx, c.Client, crds); err != nil {
		return nil, fmt.Errorf("installing JobSet's CRD: %w", err)
	}
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	probe, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	files, err := ServingCert("jobset", "jobset-webhook-service.jobset-system.svc")
	if err != nil {
		return nil, err
	}
	certDir := filepath.Join(logDir, "jobset-certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, err
	}
	for _, name := range []string{"tls.crt", "tls.key"} {
		if err := os.WriteFile(filepath.Join(certDir, name), files[name], 0o600); err != nil {
			return nil, err
		}
	}
	if err := installJobSetWebhooks(ctx, c.Client, home, "https://"+addr, files["ca.crt"]); err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	config := filepath.Join(logDir, "jobset.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, jobSetConfig, p, certDir, probe), 0o600); err != nil {
		return nil, err
	}
	proc, err := StartProcess("jobset", logDir, []string{"KUBECONFIG=" + c.Kubeconfig}, bin, "--config", config)
	if err != nil {
		return nil, err
	}
	if err := waitJobSetWebhooks(ctx, c.Client, proc); err != nil {
		proc.Stop()
		return nil, err
	}
	c.jobSet = proc
	return proc.Stop, nil
}

// JobSetPid is the process ID of the JobSet controller StartJobSet started (0: none).
func (c *Cluster) JobSetPid() int {
	if c.jobSet == nil {
		return 0
	}
	return c.jobSet.Pid()
}

// JobSetBinary is the JobSet controller StartJobSet runs, in the tools folder toolsDir.
func JobSetBinary(toolsDir string) (string, error) {
	home, err := toolDir(toolsDir, "jobset-*")
	if err != nil {
		return "", err
	}
	return filepath.Join(home, "jobset"), nil
}

// toolDir is the one folder of dir that matches glob.
func toolDir(dir, glob string) (string, error) {
	found, _ := filepath.Glob(filepath.Join(dir, glob))
	if len(found) == 0 {
		return "", fmt.Errorf("no %s in %s: build the tools with `bash hack/tools.sh cluster`", glob, dir)
	}
	return found[len(found)-1], nil
}

// installJobSetWebhooks installs JobSet's webhook configurations (its release's, from home) with
// their clients at base and trusting bundle; its pod webhooks see only JobSets' pods, as its
// release's kustomization makes them.
func installJobSetWebhooks(ctx context.Context, c client.Client, home, base string, bundle []byte) error {
	configs, err := ReadObjects(filepath.Join(home, "webhooks.yaml"))
	if err != nil {
		return err
	}
	caBundle := base64.StdEncoding.EncodeToString(bundle)
	for _, cfg := range configs {
		hooks, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
		for _, h := range hooks {
			hook := h.(map[string]any)
			path, _, _ := unstructured.NestedString(hook, "clientConfig", "service", "path")
			hook["clientConfig"] = map[string]any{"url": base + path, "caBundle": caBundle}
			if rules, _, _ := unstructured.NestedSlice(hook, "rules"); len(rules) > 0 {
				if res, _, _ := unstructured.NestedStringSlice(rules[0].(map[string]any), "resources"); len(res) > 0 && res[0] == "pods" {
					hook["objectSelector"] = map[string]any{"matchExpressions": []any{map[string]any{"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}}}
				}
			}
		}
		if err := unstructured.SetNestedSlice(cfg.Object, hooks, "webhooks"); err != nil {
			return err
		}
		cfg.SetName("jobset-" + cfg.GetName())
	}
	return Apply(ctx, c, "", configs)
}

// waitJobSetWebhooks waits until the apiserver admits a JobSet through JobSet's webhooks (a
// server-side dry run), or the controller exits.
func waitJobSetWebhooks(ctx context.Context, c client.Client, proc *Process) error {
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
		"metadata": map[string]any{"name": "webhook-probe", "namespace": metav1.NamespaceDefault},
		"spec": map[string]any{"replicatedJobs": []any{map[string]any{"name": "probe", "template": map[string]any{"spec": map[string]any{
			"template": map[string]any{"spec": map[string]any{"restartPolicy": "Never", "containers": []any{map[string]any{"name": "probe", "image": "probe"}}}}}}}}},
	}}
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := proc.Exited(); err != nil {
			return false, err
		}
		last = c.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		return last == nil || apierrors.IsAlreadyExists(last), nil
	})
	if err != nil {
		return fmt.Errorf("JobSet's webhooks did not answer within 2 minutes: %v (last: %v); the end of its log %s:\n%s", err, last, proc.Log, proc.Tail())
	}
	return nil
}
