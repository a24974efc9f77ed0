package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
)

// serviceAccountNamespace is where a pod finds its own namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// runInstallKubectl is `kiln install-kubectl DEST`, the init container of an MPIJob launcher in
// kubectl-exec mode: it copies this binary to DEST, where, called kubectl, it serves the
// `kubectl exec` that Kubeflow v1's kubexec.sh runs.
func runInstallKubectl(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: kiln install-kubectl DEST (the path of the kubectl to write)")
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this binary: %w", err)
	}
	in, err := os.Open(self)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(args[0], os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return fmt.Errorf("writing %s: %w", args[0], err)
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return fmt.Errorf("writing %s: %w", args[0], err)
	}
	return out.Close()
}

// execRequest is a parsed `kubectl exec POD [-c CONTAINER] [-n NAMESPACE] [-i] -- COMMAND...`.
type execRequest struct {
	pod, container, namespace string
	stdin                     bool
	command                   []string
}

// parseKubectl reads the kubectl command line kiln serves: exec only.
func parseKubectl(args []string) (execRequest, error) {
	var r execRequest
	if len(args) == 0 || args[0] != "exec" {
		return r, fmt.Errorf("this kubectl is kiln's and serves only `kubectl exec POD [-c CONTAINER] [-n NAMESPACE] [-i] -- COMMAND...` (MPIJob kubectl-exec mode)")
	}
	fs := flag.NewFlagSet("kubectl exec", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&r.container, "container", "", "container to run the command in")
	fs.StringVar(&r.container, "c", "", "container to run the command in")
	fs.StringVar(&r.namespace, "namespace", "", "namespace of the pod")
	fs.StringVar(&r.namespace, "n", "", "namespace of the pod")
	fs.BoolVar(&r.stdin, "stdin", false, "pass stdin to the command")
	fs.BoolVar(&r.stdin, "i", false, "pass stdin to the command")
	rest := args[1:]
	if i := slices.Index(rest, "--"); i >= 0 {
		rest, r.command = rest[:i], rest[i+1:]
	}
	for len(rest) > 0 {
		if !strings.HasPrefix(rest[0], "-") {
			if r.pod != "" {
				return r, fmt.Errorf("kubectl exec: one pod only, got %q and %q", r.pod, rest[0])
			}
			r.pod, rest = rest[0], rest[1:]
			continue
		}
		if err := fs.Parse(rest); err != nil {
			return r, fmt.Errorf("kubectl exec: %w", err)
		}
		rest = fs.Args()
	}
	switch {
	case r.pod == "":
		return r, fmt.Errorf("kubectl exec: name the pod")
	case len(r.command) == 0:
		return r, fmt.Errorf("kubectl exec %s: give the command after --", r.pod)
	}
	return r, nil
}

// runKubectl serves `kubectl exec` with the pod's service account: it runs the command in the
// pod, streams its output and exits with its exit code.
func runKubectl(args []string) error {
	r, err := parseKubectl(args)
	if err != nil {
		return err
	}
	if r.namespace == "" {
		ns, err := os.ReadFile(serviceAccountNamespace)
		if err != nil {
			return fmt.Errorf("kubectl exec: no --namespace and no service account namespace: %w", err)
		}
		r.namespace = strings.TrimSpace(string(ns))
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return fmt.Errorf("kubectl exec: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(r.namespace).Name(r.pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: r.container, Command: r.command, Stdin: r.stdin, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
	if err != nil {
		return err
	}
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
	if err != nil {
		return err
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool { return true })
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	streams := remotecommand.StreamOptions{Stdout: os.Stdout, Stderr: os.Stderr}
	if r.stdin {
		streams.Stdin = os.Stdin
	}
	err = exec.StreamWithContext(ctx, streams)
	var code utilexec.CodeExitError
	if errors.As(err, &code) {
		os.Exit(code.Code)
	}
	return err
}
