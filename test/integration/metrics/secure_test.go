package metrics

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/kiln-ml/kiln/test/testenv"
)

// TestSecureMetricsNeedAnAuthorizedToken runs the manager with --metrics-secure (the default
// install's, see the release suite): /metrics is HTTPS, HTTP/1.1 only, refuses callers without a
// token or with one the apiserver does not accept (401) and callers whose token may not get
// /metrics (403), and answers a ServiceAccount bound to the install's kiln-metrics-reader role.
func TestSecureMetricsNeedAnAuthorizedToken(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	kube, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	token := func(sa string) string {
		t.Helper()
		if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("requesting a token for %s: %v", sa, err)
		}
		return tr.Status.Token
	}
	// The install's role for scrapers (config/rbac), bound to a Prometheus ServiceAccount.
	var reader rbacv1.ClusterRole
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "metrics_reader_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &reader); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: reader.Name + "-" + ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: reader.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "prometheus", Namespace: ns}},
	}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, &reader, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	allowed, stranger := token("prometheus"), token("stranger")

	o := testenv.ManagerOptions()
	o.MetricsAddr, o.SecureMetrics = testenv.FreeAddr(t), true
	stop, err := env.StartManager(o)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	if proto := testenv.NegotiatedProtocol(t, o.MetricsAddr); proto != "http/1.1" {
		t.Errorf("the metrics server agreed to speak %q, want http/1.1 (HTTP/2 is off without --enable-http2)", proto)
	}
	httpc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the test trusts the manager's self-signed certificate
	get := func(bearer string) (int, string, error) {
		req, _ := http.NewRequest(http.MethodGet, "https://"+o.MetricsAddr+"/metrics", nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := httpc.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), nil
	}
	for _, c := range []struct {
		who, token string
		want       int
	}{{"no token", "", http.StatusUnauthorized}, {"a token the apiserver does not know", "not-a-token", http.StatusUnauthorized},
		{"a token without the role", stranger, http.StatusForbidden}, {"the prometheus ServiceAccount", allowed, http.StatusOK}} {
		testenv.Eventually(t, func() error {
			code, body, err := get(c.token)
			switch {
			case err != nil:
				return err
			case code != c.want:
				return fmt.Errorf("%s: /metrics answered %d, want %d", c.who, code, c.want)
			case c.want == http.StatusOK && !strings.Contains(body, "controller_runtime_"):
				return fmt.Errorf("%s: the answer holds no metrics:\n%.300s", c.who, body)
			}
			return nil
		})
	}
}
