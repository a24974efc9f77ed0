// Package release checks what `make release` ships against the real kube-apiserver: the install
// manifest applies server-side with no error, every CRD in it becomes Established and the
// manager's image is pinned; the Helm chart's defaults render exactly the manifest's objects; the
// chart's values render what they promise and apply too.
package release

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/kiln-ml/kiln/internal/devcluster"
	"github.com/kiln-ml/kiln/internal/release"
	"github.com/kiln-ml/kiln/internal/version"
	"github.com/kiln-ml/kiln/test/testenv"
)

// tag is the version these tests release as.
const tag = "v9.8.7-test-g1234567"

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.RunBare(m, &env))
}

func installObjects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	data, err := release.InstallManifest(testenv.RepoRoot(), tag)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), ":latest") {
		t.Error("install.yaml names an image :latest")
	}
	objs, err := release.Objects(data)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// apply server-side applies objs to the test's apiserver and waits for their CRDs.
func apply(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	c, err := client.New(env.Config, client.Options{Scheme: devcluster.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := devcluster.Apply(context.Background(), c, "", objs); err != nil {
		t.Fatal(err)
	}
	if err := devcluster.WaitEstablished(context.Background(), c, objs); err != nil {
		t.Fatal(err)
	}
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

func managerContainer(t *testing.T, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	d := find(objs, "Deployment", "kiln-manager")
	if d == nil {
		t.Fatal("no Deployment kiln-manager")
	}
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(containers) != 1 {
		t.Fatalf("kiln-manager has %d containers, want 1", len(containers))
	}
	return containers[0].(map[string]any)
}

func TestInstallManifestAppliesWithItsImagePinned(t *testing.T) {
	objs := installObjects(t)
	if got, want := managerContainer(t, objs)["image"], version.Repository+":"+tag; got != want {
		t.Errorf("manager image = %v, want %s", got, want)
	}
	// Secure by default: /metrics over HTTPS to authorized callers (the metrics suite shows such a
	// server refusing an anonymous scrape), a role for scrapers, HTTP/2 off.
	args := toStrings(managerContainer(t, objs)["args"])
	if !slices.Contains(args, "--metrics-secure") || slices.Contains(args, "--enable-http2") {
		t.Errorf("manager args %v: want --metrics-secure and no --enable-http2", args)
	}
	if find(objs, "ClusterRole", "kiln-metrics-reader") == nil {
		t.Error("install.yaml has no kiln-metrics-reader ClusterRole for scrapers")
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind())
	}
	for _, want := range []string{"Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
		"Role", "RoleBinding", "Deployment", "Service", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "PodDisruptionBudget"} {
		if !slices.Contains(kinds, want) {
			t.Errorf("install.yaml has no %s (kinds: %v)", want, kinds)
		}
	}
	crds := 0
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			crds++
		}
	}
	bases, _ := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "*.yaml"))
	if crds != len(bases) {
		t.Errorf("install.yaml has %d CRDs, config/crd/bases %d", crds, len(bases))
	}
	apply(t, objs)
}

// The chart installed with its defaults makes the manifest's objects; the Namespace is helm's
// (--create-namespace).
func TestChartDefaultsAreTheInstallManifest(t *testing.T) {
	path, err := release.PackageChart(testenv.RepoRoot(), tag, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ch, err := release.LoadChart(path)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Version != release.ChartVersion(tag) || ch.Metadata.AppVersion != tag {
		t.Errorf("packaged chart version %s appVersion %s, want %s and %s", ch.Metadata.Version, ch.Metadata.AppVersion, release.ChartVersion(tag), tag)
	}
	rendered, err := release.RenderChart(ch, release.Namespace, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, got := byKey(installObjects(t)), byKey(rendered)
	delete(want, "Namespace//"+release.Namespace)
	for key := range want {
		if _, ok := got[key]; !ok {
			t.Errorf("the chart does not make %s", key)
		}
	}
	for key, obj := range got {
		if _, ok := want[key]; !ok {
			t.Errorf("the chart makes %s, which install.yaml does not", key)
		} else if diff := cmp.Diff(want[key], obj); diff != "" {
			t.Errorf("%s differs (-install.yaml +chart):\n%s", key, diff)
		}
	}
}

func byKey(objs []*unstructured.Unstructured) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, o := range objs {
		out[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = o.Object
	}
	return out
}

func TestChartValues(t *testing.T) {
	ch, err := release.LoadChart(filepath.Join(testenv.RepoRoot(), "charts", "kiln"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal([]byte(`
image: {repository: registry.example/kiln, tag: v1.2.3, pullPolicy: Always}
replicas: 3
watchNamespaces: [team-a, team-b]
leaderElection: {enabled: false}
metrics: {secure: true}
webhook: {certMode: cert-manager}
resources: {requests: {cpu: 200m, memory: 256Mi}, limits: {memory: 1Gi}}
nodeSelector: {node-role.kubernetes.io/control-plane: ""}
tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}]
extraArgs: [--default-clean-pod-policy=All]
`), &values); err != nil {
		t.Fatal(err)
	}
	const ns = "ml-platform"
	objs, err := release.RenderChart(ch, ns, values)
	if err != nil {
		t.Fatal(err)
	}
	c := managerContainer(t, objs)
	if c["image"] != "registry.example/kiln:v1.2.3" || c["imagePullPolicy"] != "Always" {
		t.Errorf("image %v pull policy %v", c["image"], c["imagePullPolicy"])
	}
	args := strings.Join(toStrings(c["args"]), " ")
	for _, want := range []string{"--namespaces=team-a,team-b", "--metrics-secure", "--webhook-cert-dir=/etc/kiln/webhook-certs", "--default-clean-pod-policy=All"} {
		if !strings.Contains(args, want) {
			t.Errorf("manager args %q lack %s", args, want)
		}
	}
	if strings.Contains(args, "--leader-elect") {
		t.Errorf("manager args %q elect a leader with leaderElection.enabled false", args)
	}
	d := find(objs, "Deployment", "kiln-manager")
	if r, _, _ := unstructured.NestedFieldNoCopy(d.Object, "spec", "replicas"); fmt.Sprint(r) != "3" {
		t.Errorf("replicas = %v, want 3", r)
	}
	for _, path := range [][]string{{"spec", "template", "spec", "nodeSelector"}, {"spec", "template", "spec", "tolerations"}, {"spec", "template", "spec", "volumes"}} {
		if _, found, _ := unstructured.NestedFieldNoCopy(d.Object, path...); !found {
			t.Errorf("Deployment has no %s", strings.Join(path, "."))
		}
	}
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		var w *unstructured.Unstructured
		for _, o := range objs {
			if o.GetKind() == kind {
				w = o
			}
		}
		if w == nil {
			t.Fatalf("no %s", kind)
		}
		if got := w.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != ns+"/kiln-webhook" {
			t.Errorf("%s inject-ca-from = %q", kind, got)
		}
		hooks, _, _ := unstructured.NestedSlice(w.Object, "webhooks")
		for _, h := range hooks {
			if got, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "service", "namespace"); got != ns {
				t.Errorf("%s calls a Service in %q, want %s", kind, got, ns)
			}
		}
	}
	cert := find(objs, "Certificate", "kiln-webhook")
	if cert == nil || find(objs, "Issuer", "kiln-selfsigned") == nil {
		t.Fatal("cert-manager mode renders no Certificate or Issuer")
	}
	if names, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames"); !slices.Contains(names, "kiln-webhook."+ns+".svc") {
		t.Errorf("certificate names %v", names)
	}

	// Everything but cert-manager's own kinds (not installed here) applies in the new namespace
	// (the watched namespaces, which get kiln's Roles, exist already).
	var appliable []*unstructured.Unstructured
	for _, name := range []string{ns, "team-a", "team-b"} {
		appliable = append(appliable, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}})
	}
	for _, o := range objs {
		if !strings.HasPrefix(o.GetAPIVersion(), "cert-manager.io/") {
			appliable = append(appliable, o)
		}
	}
	apply(t, appliable)

	values["webhook"] = map[string]any{"certMode": "vault"}
	if _, err := release.RenderChart(ch, ns, values); err == nil || !strings.Contains(err.Error(), "webhook.certMode") {
		t.Errorf("an unknown certMode rendered (err %v); want an error naming webhook.certMode", err)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}

// The source tree's own version (VERSION) is the one its kustomization and chart name.
func TestSourceTreeFollowsVERSION(t *testing.T) {
	root := testenv.RepoRoot()
	read := func(p string) string {
		data, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	v := strings.TrimSpace(read("VERSION"))
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+$`).MatchString(v) {
		t.Fatalf("VERSION %q is not vMAJOR.MINOR.PATCH", v)
	}
	for file, want := range map[string]string{
		"config/manager/kustomization.yaml": "newTag: " + v,
		"charts/kiln/Chart.yaml":            "appVersion: " + v,
	} {
		if !strings.Contains(read(file), want) {
			t.Errorf("%s does not say %q (VERSION is %s)", file, want, v)
		}
	}
	if !strings.Contains(read("charts/kiln/Chart.yaml"), "version: "+release.ChartVersion(v)) {
		t.Errorf("charts/kiln/Chart.yaml's version is not %s", release.ChartVersion(v))
	}
}

// A namespaced install (the chart's watchNamespaces) grants kiln a Role in each watched namespace
// and cluster-wide only the cluster-scoped APIs it uses: asked by the apiserver's own RBAC, its
// ServiceAccount may create pods in a watched namespace, but not in another, and may not list
// pods or jobs across the cluster. With MPIJob's kubectl-exec mode, its rights on pods/exec,
// Roles and RoleBindings are in the watched namespaces too (never kube-system), and it deletes
// no ConfigMap.
func TestNamespacedInstallGrantsRolesNotClusterRights(t *testing.T) {
	ch, err := release.LoadChart(filepath.Join(testenv.RepoRoot(), "charts", "kiln"))
	if err != nil {
		t.Fatal(err)
	}
	const ns = "kiln-namespaced"
	objs, err := release.RenderChart(ch, ns, map[string]any{"watchNamespaces": []any{"team-a", "team-b"}, "mpi": map[string]any{"kubectlExec": true}})
	if err != nil {
		t.Fatal(err)
	}
	cr := find(objs, "ClusterRole", "kiln-manager")
	rules, _, _ := unstructured.NestedSlice(cr.Object, "rules")
	for _, r := range rules {
		rule := r.(map[string]any)
		runtimes := map[string]string{"[trainer.kubeflow.org]": "[clustertrainingruntimes]", "[serving.kserve.io]": "[clusterservingruntimes]"}
		if fmt.Sprint(rule["resources"]) == runtimes[fmt.Sprint(rule["apiGroups"])] && fmt.Sprint(rule["verbs"]) == "[get list watch]" {
			continue // TrainJobs and KServe's InferenceServices of every namespace name cluster runtimes: read only
		}
		for _, g := range rule["apiGroups"].([]any) {
			if !slices.Contains([]any{"admissionregistration.k8s.io", "apiextensions.k8s.io", "authentication.k8s.io", "authorization.k8s.io"}, g) {
				t.Errorf("the ClusterRole of a namespaced install grants %v", r)
			}
		}
	}
	can := installRights(t, objs, ns, "team-a", "team-b", "team-c")
	rightsHold(t, can, []accessReview{
		{"create", "", "pods", "team-a", true},
		{"list", "kubeflow.org", "tfjobs", "team-b", true},
		{"create", "", "pods", "team-c", false},
		{"list", "", "pods", "", false},
		{"list", "kubeflow.org", "pytorchjobs", "", false},
		{"list", "apiextensions.k8s.io", "customresourcedefinitions", "", true},
		// MPIJob kubectl-exec: in the watched namespaces only, never in kube-system.
		{"create", "", "pods/exec", "team-a", true},
		{"create", "", "pods/exec", "kube-system", false},
		{"create", "", "pods/exec", "team-c", false},
		{"patch", "rbac.authorization.k8s.io", "rolebindings", "team-b", true},
		{"create", "rbac.authorization.k8s.io", "roles", "kube-system", false},
		{"patch", "rbac.authorization.k8s.io", "rolebindings", "kube-system", false},
		// ConfigMaps: kiln makes and updates its own, and deletes none.
		{"create", "", "configmaps", "team-a", true},
		{"delete", "", "configmaps", "team-a", false},
		{"list", "", "configmaps", "kube-system", false},
	})
}

// installRights applies the RBAC objects and ServiceAccounts of a rendered install in namespace
// ns (creating it and the other namespaces named), its cluster-scoped names suffixed with ns so
// that installs rendered by different tests do not overwrite each other's, and returns what the
// apiserver's own RBAC answers when kiln's ServiceAccount asks to verb a resource ("pods/exec"
// names a subresource) in a namespace ("" for all of them).
func installRights(t *testing.T, objs []*unstructured.Unstructured, ns string, namespaces ...string) func(verb, group, resource, namespace string) bool {
	t.Helper()
	ctx := context.Background()
	c, err := client.New(env.Config, client.Options{Scheme: devcluster.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range append([]string{ns}, namespaces...) {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	var rbac []*unstructured.Unstructured
	for _, o := range objs {
		if !strings.HasPrefix(o.GetAPIVersion(), "rbac.") && o.GetKind() != "ServiceAccount" {
			continue
		}
		o = o.DeepCopy()
		if strings.HasPrefix(o.GetKind(), "Cluster") {
			o.SetName(o.GetName() + "-" + ns)
		}
		if kind, _, _ := unstructured.NestedString(o.Object, "roleRef", "kind"); kind == "ClusterRole" {
			name, _, _ := unstructured.NestedString(o.Object, "roleRef", "name")
			if find(objs, "ClusterRole", name) != nil {
				_ = unstructured.SetNestedField(o.Object, name+"-"+ns, "roleRef", "name")
			}
		}
		rbac = append(rbac, o)
	}
	apply(t, rbac)
	sa := "system:serviceaccount:" + ns + ":kiln-manager"
	return func(verb, group, resource, namespace string) bool {
		t.Helper()
		resource, sub, _ := strings.Cut(resource, "/")
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Subresource: sub, Namespace: namespace}}}
		if err := c.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		return sar.Status.Allowed
	}
}

// rightsHold asks each access review until the apiserver's RBAC (its informers catch up with the
// applied objects) gives the wanted answer.
func rightsHold(t *testing.T, can func(verb, group, resource, namespace string) bool, reviews []accessReview) {
	t.Helper()
	for _, c := range reviews {
		testenv.Eventually(t, func() error {
			if got := can(c.verb, c.group, c.resource, c.namespace); got != c.want {
				return fmt.Errorf("may %s %s.%s in %q: %v, want %v", c.verb, c.resource, c.group, c.namespace, got, c.want)
			}
			return nil
		})
	}
}

type accessReview struct {
	verb, group, resource, namespace string
	want                             bool
}

// The default install (cluster-wide) holds what its kinds need across the cluster and no more: it
// makes and patches ConfigMaps and Secrets but deletes none and reads no Secret, it may not exec
// into pods or grant rights (Roles, RoleBindings), and it updates only its own webhook
// configurations and CRDs. RBAC cannot scope reads by label: the ConfigMaps kiln lists are
// narrowed by its cache's label selector (a PyJob's script), and the MPI hostfile is read by name.
func TestDefaultInstallGrantsOnlyWhatItsKindsNeed(t *testing.T) {
	ch, err := release.LoadChart(filepath.Join(testenv.RepoRoot(), "charts", "kiln"))
	if err != nil {
		t.Fatal(err)
	}
	const ns = "kiln-cluster-wide"
	objs, err := release.RenderChart(ch, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	can := installRights(t, objs, ns, "team-a")
	rightsHold(t, can, []accessReview{
		{"create", "", "pods", "team-a", true},
		{"list", "kubeflow.org", "tfjobs", "", true},
		{"create", "", "configmaps", "team-a", true},
		{"delete", "", "configmaps", "team-a", false},
		{"delete", "", "configmaps", "kube-system", false},
		{"deletecollection", "", "configmaps", "", false},
		{"update", "", "configmaps", "kube-system", false},
		{"create", "", "secrets", "team-a", true},
		{"get", "", "secrets", "kube-system", false},
		{"list", "", "secrets", "", false},
		{"delete", "", "secrets", "team-a", false},
		{"create", "", "pods/exec", "team-a", false},
		{"create", "rbac.authorization.k8s.io", "roles", "team-a", false},
		{"create", "rbac.authorization.k8s.io", "rolebindings", "team-a", false},
		{"bind", "rbac.authorization.k8s.io", "clusterroles", "", false},
		{"escalate", "rbac.authorization.k8s.io", "clusterroles", "", false},
		{"create", "", "serviceaccounts/token", "team-a", false},
		{"impersonate", "", "serviceaccounts", "team-a", false},
		{"update", "apiextensions.k8s.io", "customresourcedefinitions", "", false},
		{"update", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", false},
		{"delete", "", "namespaces", "", false},
		{"update", "", "nodes", "", false},
	})
}

// The manager run as the default install runs it (install.yaml's arguments, but for local
// addresses, no webhooks and no leader election) refuses an anonymous scrape of /metrics.
func TestDefaultInstallRefusesAnAnonymousScrape(t *testing.T) {
	objs := installObjects(t)
	var crds []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, o)
		}
	}
	apply(t, crds)
	metricsAddr, probeAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
	var args []string
	for _, a := range toStrings(managerContainer(t, objs)["args"]) {
		switch {
		case a == "--leader-elect":
			continue
		case strings.HasPrefix(a, "--metrics-bind-address="):
			a = "--metrics-bind-address=" + metricsAddr
		case strings.HasPrefix(a, "--health-probe-bind-address="):
			a = "--health-probe-bind-address=" + probeAddr
		case strings.HasPrefix(a, "--webhook-port="):
			a = "--webhook-port=0"
		}
		args = append(args, a)
	}
	kiln, err := testenv.StartProcess("kiln", t.TempDir(), nil, testenv.BuildKiln(t), append(args, "--kubeconfig", env.Kubeconfig(t))...)
	if err != nil {
		t.Fatal(err)
	}
	defer kiln.Stop()
	httpc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // only the answer's code is looked at
	testenv.EventuallyWithin(t, time.Minute, func() error {
		if err := kiln.Exited(); err != nil {
			t.Fatal(err)
		}
		resp, err := httpc.Get("https://" + metricsAddr + "/metrics")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			return fmt.Errorf("an anonymous scrape got %d, want 401", resp.StatusCode)
		}
		return nil
	})
}

// KServe's API is installed on request alone: by config/components/kserve over config/default,
// and by the chart's kserve.enabled; either adds kiln's three serving.kserve.io CRDs, KServe's
// runtimes and --kserve, and applies (the runtimes validated by the CRDs); the chart's
// kserve.ingress sets the Ingresses' domain and class.
func TestKServesAPIInstallsOnRequest(t *testing.T) {
	root := testenv.RepoRoot()
	overlay := t.TempDir()
	rel := func(dir ...string) string { // kustomize takes relative paths alone
		p, err := filepath.Rel(overlay, filepath.Join(append([]string{root}, dir...)...))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte("resources: ["+rel("config", "default")+
		"]\ncomponents: ["+rel("config", "components", "kserve")+"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), overlay)
	if err != nil {
		t.Fatal(err)
	}
	built, err := res.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	fromKustomize, err := release.Objects(built)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := release.LoadChart(filepath.Join(root, "charts", "kiln"))
	if err != nil {
		t.Fatal(err)
	}
	fromChart, err := release.RenderChart(ch, "kiln-kserve", map[string]any{"kserve": map[string]any{"enabled": true,
		"ingress": map[string]any{"domain": "models.example.com", "className": "nginx"}}})
	if err != nil {
		t.Fatal(err)
	}
	defaults, err := release.RenderChart(ch, "kiln-kserve", nil)
	if err != nil {
		t.Fatal(err)
	}
	runtimes, err := devcluster.ReadObjects(filepath.Join(root, "config", "kserve", "runtimes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	count := func(objs []*unstructured.Unstructured) (crds, csrs int) {
		for _, o := range objs {
			switch {
			case o.GetKind() == "CustomResourceDefinition" && strings.HasSuffix(o.GetName(), ".serving.kserve.io"):
				crds++
			case o.GetKind() == "ClusterServingRuntime":
				csrs++
			}
		}
		return crds, csrs
	}
	for name, objs := range map[string][]*unstructured.Unstructured{"config/components/kserve": fromKustomize, "the chart's kserve.enabled": fromChart} {
		if crds, csrs := count(objs); crds != 3 || csrs != len(runtimes) {
			t.Errorf("%s: %d serving.kserve.io CRDs and %d ClusterServingRuntimes, want 3 and %d", name, crds, csrs, len(runtimes))
		}
		if args := toStrings(managerContainer(t, objs)["args"]); !slices.Contains(args, "--kserve") {
			t.Errorf("%s: manager args %v lack --kserve", name, args)
		}
	}
	if args := strings.Join(toStrings(managerContainer(t, fromChart)["args"]), " "); !strings.Contains(args, "--kserve-ingress-domain=models.example.com --kserve-ingress-class=nginx") {
		t.Errorf("the chart's manager args %q lack kserve.ingress's", args)
	}
	if crds, csrs := count(defaults); crds != 0 || csrs != 0 || slices.Contains(toStrings(managerContainer(t, defaults)["args"]), "--kserve") {
		t.Errorf("the chart's defaults install KServe's API: %d CRDs, %d runtimes", crds, csrs)
	}
	// Templated runtime arguments reach the cluster unchanged: KServe fills them, not Helm.
	if !strings.Contains(fmt.Sprint(find(fromChart, "ClusterServingRuntime", "kserve-sklearnserver").Object), "--model_name={{.Name}}") {
		t.Error("the chart's kserve-sklearnserver lost its {{.Name}} argument")
	}
	var crds, rest []*unstructured.Unstructured
	for _, o := range fromKustomize {
		if o.GetKind() == "CustomResourceDefinition" || o.GetKind() == "Namespace" {
			crds = append(crds, o)
		} else if o.GetKind() == "ClusterServingRuntime" {
			rest = append(rest, o)
		}
	}
	apply(t, crds)
	apply(t, rest)
}

// kubectl kiln ships as an archive per platform and a krew manifest whose checksums are the
// archives', each holding a kubectl-kiln stamped with the release's version (built here for this
// machine only: make release builds the four platforms).
func TestPluginArchivesAndTheirKrewManifest(t *testing.T) {
	dir := t.TempDir()
	written, err := release.Plugins(testenv.RepoRoot(), tag, "abc123", dir, []release.Platform{release.Native()})
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, release.PluginArchive(tag, release.Native()))
	if want := []string{archive, filepath.Join(dir, "kiln.yaml")}; !slices.Equal(written, want) {
		t.Fatalf("wrote %v, want %v", written, want)
	}
	var manifest struct {
		Kind     string
		Metadata struct{ Name string }
		Spec     struct {
			Version   string
			Platforms []struct {
				Selector         struct{ MatchLabels map[string]string }
				URI, Sha256, Bin string
			}
		}
	}
	data, err := os.ReadFile(written[1])
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &manifest); err != nil {
		t.Fatal(err)
	}
	if manifest.Kind != "Plugin" || manifest.Metadata.Name != "kiln" || manifest.Spec.Version != tag || len(manifest.Spec.Platforms) != 1 {
		t.Fatalf("krew manifest:\n%s", data)
	}
	p := manifest.Spec.Platforms[0]
	b, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(b); p.Sha256 != hex.EncodeToString(sum[:]) || p.Bin != "kubectl-kiln" ||
		p.URI != release.Downloads+tag+"/"+filepath.Base(archive) || p.Selector.MatchLabels["os"] != runtime.GOOS {
		t.Errorf("platform %+v: want the archive's sha256, its download URI and this machine's os", p)
	}
	tarball := exec.Command("tar", "-xzf", archive, "-C", dir)
	if out, err := tarball.CombinedOutput(); err != nil {
		t.Fatalf("unpacking %s: %v\n%s", archive, err, out)
	}
	out, err := exec.Command(filepath.Join(dir, "kubectl-kiln"), "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "kiln "+tag) || !strings.Contains(string(out), "abc123") {
		t.Errorf("kubectl-kiln version: %v\n%s\nwant %s and its commit", err, out, tag)
	}
}
