package devcluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	kubeflowv2beta1 "github.com/kiln-ml/kiln/api/kubeflow.org/v2beta1"
	"github.com/kiln-ml/kiln/internal/admission"
	"github.com/kiln-ml/kiln/internal/conversion"
	"github.com/kiln-ml/kiln/internal/manager"
)

// WebhookNamespace holds the self-managed webhook certificate, as kiln-system does in a real install.
const WebhookNamespace = "kiln-system"

// LocalWebhooks serves o's admission webhooks at addr (host:port) on this machine, with a
// self-managed certificate for that IP address, checked every checkInterval.
func LocalWebhooks(o manager.Options, addr string, checkInterval time.Duration) (manager.Options, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return o, err
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return o, fmt.Errorf("webhook address %s: want an IP address, e.g. 127.0.0.1:9443", addr)
	}
	o.Webhook.Host = host
	if o.Webhook.Port, err = strconv.Atoi(port); err != nil {
		return o, err
	}
	o.Webhook.Namespace, o.Webhook.SecretName = WebhookNamespace, "kiln-webhook-cert"
	o.Webhook.IPAddresses = []net.IP{ip}
	o.Webhook.CheckInterval = checkInterval
	return o, nil
}

// InstallWebhooks creates kiln's webhook configurations for the kinds o enables, pointing the
// apiserver at https://<o's webhook host:port> by URL (no Service routing to a local process)
// with no caBundle: kiln injects it. It points the conversion of the installed CRDs kiln
// converts at the same server, and creates the certificate's namespace.
func InstallWebhooks(ctx context.Context, c client.Client, o manager.Options) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.Webhook.Namespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	set, err := manager.Admission(o)
	if err != nil {
		return err
	}
	base := "https://" + net.JoinHostPort(o.Webhook.Host, strconv.Itoa(o.Webhook.Port))
	mutating, validating := set.Configurations(func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(base + path)}
	})
	if err := c.Create(ctx, mutating); err != nil {
		return fmt.Errorf("installing the mutating webhooks: %w", err)
	}
	if err := c.Create(ctx, validating); err != nil {
		return fmt.Errorf("installing the validating webhooks: %w", err)
	}
	for _, name := range conversion.CRDs {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := c.Get(ctx, client.ObjectKey{Name: name}, &crd); err != nil {
				return client.IgnoreNotFound(err)
			}
			conversion.Point(&crd, apiextensionsv1.WebhookClientConfig{URL: ptr.To(base + conversion.Path)})
			return c.Update(ctx, &crd)
		})
		if err != nil {
			return fmt.Errorf("pointing the conversion of CRD %s at kiln: %w", name, err)
		}
	}
	return nil
}

// UninstallWebhooks deletes kiln's webhook configurations.
func UninstallWebhooks(ctx context.Context, c client.Client) error {
	for _, obj := range []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: admission.MutatingName}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: admission.ValidatingName}},
	} {
		if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// FreeAddr is a 127.0.0.1 address with a port nobody listens on (for a moment). The port is
// drawn at random from quietPorts, where neither another process's listen on port 0 nor an
// outgoing connection can take it before the caller listens on it (a port from the kernel's
// ephemeral range was, once, under the load of several suites: a manager then failed with
// "address already in use"); any free port when there is no such room.
func FreeAddr() (string, error) {
	if lo, hi, ok := quietPorts(); ok {
		for range 64 {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(lo+rand.IntN(hi-lo))))
			if err == nil {
				defer l.Close()
				return l.Addr().String(), nil
			}
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free local port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// quietPorts are [lo, hi): ports from 20000 up to 30000, or to the kernel's ephemeral range
// (net.ipv4.ip_local_port_range, from which it hands out ports for listens on port 0 and for
// outgoing connections) if it starts lower; under the ports kwokctl takes, downward from 32767.
// ok is false when fewer than 1000 remain.
func quietPorts() (lo, hi int, ok bool) {
	lo, hi = 20000, 30000
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if start, err := strconv.Atoi(f[0]); err == nil {
				hi = min(hi, start)
			}
		}
	}
	return lo, hi, hi-lo >= 1000
}

// WaitForWebhooks waits until the apiserver admits through kiln's webhooks: a server-side dry
// run of a small TFJob (which runs admission, stores nothing) succeeds. Any client will do: the
// probe is unstructured. Until kiln has injected
// its CA bundle and serves its certificate, such requests fail (failurePolicy Fail).
func WaitForWebhooks(ctx context.Context, c client.Client, timeout time.Duration) error {
	probe := func() client.Object {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": kubeflowv1.GroupVersion.String(), "kind": kubeflowv1.TFJobKind,
			"metadata": map[string]any{"generateName": "webhook-probe-", "namespace": metav1.NamespaceDefault},
			"spec": map[string]any{"tfReplicaSpecs": map[string]any{"Worker": map[string]any{
				"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "tensorflow", "image": "probe"}}}},
			}}},
		}}
	}
	// A v2beta1 MPIJob is converted to the stored v1 before admission: its dry run answers once
	// the conversion webhook does too (unless the cluster has no MPIJob CRD).
	converted := func() client.Object {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": kubeflowv2beta1.GroupVersion.String(), "kind": kubeflowv1.MPIJobKind,
			"metadata": map[string]any{"generateName": "webhook-probe-", "namespace": metav1.NamespaceDefault},
			"spec": map[string]any{"mpiReplicaSpecs": map[string]any{"Launcher": map[string]any{
				"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "mpi", "image": "probe"}}}},
			}}},
		}}
	}
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if last = c.Create(ctx, probe(), client.DryRunAll); last != nil {
			return false, nil
		}
		if last = c.Create(ctx, converted(), client.DryRunAll); meta.IsNoMatchError(last) {
			last = nil
		}
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("kiln's admission and conversion webhooks did not answer within %s: %v", timeout, last)
	}
	return nil
}
