package main

// KServe's InferenceServices beside KServe: the same N InferenceServices of KServe's sklearn
// sample (Standard mode, one replica each, in the model form KServe's defaulting webhook writes),
// on the same kind of cluster with KServe's runtimes (kiln's pinned copies), served once by kiln
// (--kserve, on kiln's serving.kserve.io CRDs) and once by KServe v0.20's own controller (built by
// hack/tools.sh bench, never part of kiln) on KServe's own CRDs: its controller writes Knative's
// conditions, which kiln's CRD refuses. Neither runs admission webhooks. Timed from a watch on the pods and the
// InferenceServices: every pod exists, every pod runs, every InferenceService Ready; the
// controllers' CPU and peak memory are read from /proc.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kservev1beta1 "github.com/kiln-ml/kiln/api/serving.kserve.io/v1beta1"
	"github.com/kiln-ml/kiln/internal/devcluster"
	"github.com/kiln-ml/kiln/internal/manager"
	"github.com/kiln-ml/kiln/test/testenv"
)

// The serving modes: kiln and KServe's controller, each serving KServe's InferenceServices, and
// the floor of the same work.
const (
	modeServing = "isvc"
	modeKServe  = "kserve"
	// modeServingFloor runs no controller of InferenceServices: a client creates the Deployments
	// and Services the round's kiln run made, and the cluster's own controllers do the rest. It is
	// what the cluster takes to serve the same objects, which no controller of them can beat.
	modeServingFloor = "isvcfloor"
	// modeServingSame is the floor of the same work: the client also creates each
	// InferenceService (on kiln's CRDs, which no controller serves in this run) just before its
	// Deployment and Service, and watches them as the kiln run's client does.
	modeServingSame = "isvcsame"
	// kserveNamespace is where KServe's controller reads its ConfigMap (its POD_NAMESPACE).
	kserveNamespace = "kserve"
	// replicasPerNode is how many sklearn replicas (1 CPU each) a fake node of 32 CPUs holds.
	replicasPerNode = 30
)

func isServingMode(mode string) bool {
	return mode == modeServing || mode == modeKServe || mode == modeServingFloor || mode == modeServingSame
}

// madeByKiln is what the last kiln serving run made, for the floor: each InferenceService's
// Deployment, then its Service.
var madeByKiln []client.Object

// inferenceServices is the workload: J InferenceServices of KServe's sklearn sample, as KServe's
// defaulting webhook writes it (which neither run has): the model form, Standard mode.
func inferenceServices(p Params) []*kservev1beta1.InferenceService {
	out := make([]*kservev1beta1.InferenceService, p.Jobs)
	for i := range out {
		out[i] = &kservev1beta1.InferenceService{
			ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: fmt.Sprintf("isvc-%05d", i),
				Annotations: map[string]string{"serving.kserve.io/deploymentMode": "Standard"}},
			Spec: kservev1beta1.InferenceServiceSpec{Predictor: kservev1beta1.PredictorSpec{Model: &kservev1beta1.ModelSpec{
				ModelFormat:            kservev1beta1.ModelFormat{Name: "sklearn"},
				PredictorExtensionSpec: kservev1beta1.PredictorExtensionSpec{StorageURI: ptr.To("gs://kfserving-examples/models/sklearn/1.0/model")}}}},
		}
	}
	return out
}

// runServing makes one serving run of mode on a cluster of its own. With p.Profile, kiln's
// manager is profiled as in the kiln mode.
func runServing(ctx context.Context, mode string, p Params, tools, dir string) (*Result, error) {
	isvcs := inferenceServices(p)
	if p.Nodes == 0 {
		// Each replica asks for the runtime's 1 CPU: a fake node's 32 CPUs hold 30 of them.
		p.Nodes = p.Jobs/replicasPerNode + 2
	}
	cluster, nodes, done, err := newCluster(ctx, mode, p, tools, dir, p.Jobs)
	if err != nil {
		return nil, err
	}
	defer done()
	c, err := client.New(cluster.Config, client.Options{Scheme: manager.Scheme()})
	if err != nil {
		return nil, err
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}}); err != nil {
		return nil, err
	}
	// Each controller its own CRDs of the same API (KServe's are a superset of kiln's), and the
	// same runtimes; the same-work floor kiln's CRDs, which no controller serves, and no runtimes;
	// the floor no InferenceServices, so neither.
	crds := filepath.Join(testenv.RepoRoot(), "config", "crd", "kserve")
	switch mode {
	case modeServingSame:
		if err := devcluster.InstallCRDs(ctx, cluster.Client, crds); err != nil {
			return nil, err
		}
		fallthrough
	case modeServingFloor:
		return servingFloor(ctx, mode, p, dir, c, cluster, nodes, isvcs)
	}
	kserveDir, err := kserveTools(tools)
	if err != nil {
		return nil, err
	}
	if mode == modeKServe {
		crds = filepath.Join(kserveDir, "crds")
	}
	if err := devcluster.InstallCRDs(ctx, cluster.Client, crds); err != nil {
		return nil, err
	}
	runtimes, err := devcluster.ReadObjects(filepath.Join(testenv.RepoRoot(), "config", "kserve", "runtimes.yaml"))
	if err != nil {
		return nil, err
	}
	if err := devcluster.Apply(ctx, cluster.Client, "", runtimes); err != nil {
		return nil, err
	}
	pid, stop, mgr, err := startOperator(ctx, mode == modeServing, cluster, tools, dir, p, []string{"--kinds=kserve-inferenceservice"},
		func() (int, func(), error) { return startKServe(ctx, cluster, kserveDir, dir) })
	if err != nil {
		return nil, err
	}
	defer stop()
	obs, err := observeInferenceServices(ctx, cluster.Config, isvcs)
	if err != nil {
		return nil, err
	}
	defer obs.stop()
	objs := make([]client.Object, len(isvcs))
	for i, isvc := range isvcs {
		objs[i] = isvc
	}
	res, err := measureOperator(ctx, mode, p, dir, c, cluster, nodes, p.Jobs, obs, objs, pid, mgr, 0)
	if err != nil {
		return nil, err
	}
	fmt.Printf("   pods exist %.1fs, all running %.1fs, every Service exists %.1fs, all Ready %.1fs (after their pods ran: p50 %.2fs, max %.2fs; after their Service: p50 %.2fs, max %.2fs); controller %.1f CPU-s, %.0f MiB peak\n",
		res.PodsExist, res.AllRunning, res.ServicesExist, res.AllSucceeded, res.DoneAfterRunning.P50, res.DoneAfterRunning.Max,
		res.DoneAfterService.P50, res.DoneAfterService.Max, res.Operator.CPUSeconds, res.Operator.PeakRSSMiB)
	if mode == modeServing {
		if madeByKiln, err = kilnsObjects(ctx, c); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// servingFloor is the run of a floor (mode): the objects kiln made in this round — for the
// same work, each after its InferenceService — created by a client with as many requests in
// flight as the InferenceServices' submission; done once every Deployment is available (kiln's
// Ready).
func servingFloor(ctx context.Context, mode string, p Params, dir string, c client.Client, cluster *devcluster.Cluster, nodes int, isvcs []*kservev1beta1.InferenceService) (*Result, error) {
	if len(madeByKiln) == 0 {
		return nil, fmt.Errorf("the serving floors create what kiln made in the round: MODES must list %s before %s", modeServing, mode)
	}
	obs := servingObserver(isvcs)
	// Each object kiln made carries its InferenceService's name where its pods are selected.
	obs.workload = func(o client.Object) string {
		switch o := o.(type) {
		case *appsv1.Deployment:
			return o.Spec.Template.Labels[kserveLabel]
		case *corev1.Service:
			return obs.serviceOf(o)
		}
		return o.GetName()
	}
	watched := []client.Object{&appsv1.Deployment{}}
	if mode == modeServingSame {
		watched = append(watched, &kservev1beta1.InferenceService{})
	}
	if err := obs.watch(ctx, cluster.Config, watched, func(obj any) {
		d, ok := obj.(*appsv1.Deployment)
		if !ok {
			return
		}
		isvc := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: d.Spec.Template.Labels[kserveLabel], ResourceVersion: d.ResourceVersion}}
		available := d.Status.ObservedGeneration >= d.Generation && d.Status.AvailableReplicas >= ptr.Deref(d.Spec.Replicas, 1)
		obs.jobChanged(isvc, available, available, func() string { return fmt.Sprintf("%+v", d.Status) })
	}); err != nil {
		return nil, err
	}
	defer obs.stop()
	byName := map[string]client.Object{}
	for _, i := range isvcs {
		byName[i.Name] = i
	}
	var objs []client.Object
	for _, o := range madeByKiln { // each InferenceService's Deployment, then its Service
		if _, ok := o.(*appsv1.Deployment); ok && mode == modeServingSame {
			isvc := byName[obs.workload(o)]
			if isvc == nil {
				return nil, fmt.Errorf("kiln's run made Deployment %s for none of the workload's InferenceServices", o.GetName())
			}
			objs = append(objs, isvc)
		}
		objs = append(objs, o.DeepCopyObject().(client.Object))
	}
	res, err := measureOperator(ctx, mode, p, dir, c, cluster, nodes, p.Jobs, obs, objs, 0, nil, 0)
	if err != nil {
		return nil, err
	}
	res.Operator = nil
	fmt.Printf("   pods exist %.1fs, all running %.1fs, every Service exists %.1fs, every Deployment available %.1fs (after its pods ran: p50 %.2fs, max %.2fs)\n",
		res.PodsExist, res.AllRunning, res.ServicesExist, res.AllSucceeded, res.DoneAfterRunning.P50, res.DoneAfterRunning.Max)
	return res, nil
}

// kserveLabel names a predictor's InferenceService on its pods.
const kserveLabel = "serving.kserve.io/inferenceservice"

// kilnsObjects is every Deployment and Service kiln made in the benchmark's namespace, each
// InferenceService's Deployment then its Service, without what the apiserver and the controllers
// set on them (owner, UID, versions, status, cluster IPs, the Deployment's revision).
func kilnsObjects(ctx context.Context, c client.Client) ([]client.Object, error) {
	var deps appsv1.DeploymentList
	var svcs corev1.ServiceList
	if err := c.List(ctx, &deps, client.InNamespace(benchNamespace)); err != nil {
		return nil, err
	}
	if err := c.List(ctx, &svcs, client.InNamespace(benchNamespace)); err != nil {
		return nil, err
	}
	made := func(m metav1.ObjectMeta) metav1.ObjectMeta {
		annotations := maps.Clone(m.Annotations)
		delete(annotations, "deployment.kubernetes.io/revision")
		return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, Labels: m.Labels, Annotations: annotations}
	}
	services := map[string]*corev1.Service{}
	for i := range svcs.Items {
		s := &svcs.Items[i]
		s.ObjectMeta = made(s.ObjectMeta)
		s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Status = "", nil, corev1.ServiceStatus{}
		services[s.Name] = s
	}
	var out []client.Object
	for i := range deps.Items {
		d := &deps.Items[i]
		d.ObjectMeta, d.Status = made(d.ObjectMeta), appsv1.DeploymentStatus{}
		out = append(out, d)
		if s := services[d.Name]; s != nil {
			out = append(out, s)
			delete(services, d.Name)
		}
	}
	for _, s := range services {
		out = append(out, s)
	}
	return out, nil
}

// kserveTools is the folder of KServe's release among the tools (hack/tools.sh).
func kserveTools(tools string) (string, error) {
	dirs, _ := filepath.Glob(filepath.Join(tools, "kserve-*"))
	if len(dirs) == 0 {
		return "", fmt.Errorf("no KServe manifests in %s: run `bash hack/tools.sh bench` (make bench with MODES naming kserve does)", tools)
	}
	return dirs[0], nil
}

// startKServe runs KServe's controller (hack/tools.sh bench built it) until stop, with KServe's
// own ConfigMap but Standard mode by default and no Ingress (kiln makes none), as a user of
// Standard mode configures it; its client as KServe ships it.
func startKServe(ctx context.Context, cluster *devcluster.Cluster, kserveDir, dir string) (int, func(), error) {
	bin := filepath.Join(kserveDir, "kserve-manager")
	objs, err := devcluster.ReadObjects(filepath.Join(kserveDir, "configmap", "inferenceservice.yaml"))
	if err != nil {
		return 0, nil, err
	}
	var config *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && o.GetName() == "inferenceservice-config" {
			config = o
		}
	}
	if config == nil {
		return 0, nil, fmt.Errorf("no ConfigMap inferenceservice-config in KServe's %s", filepath.Join(kserveDir, "configmap"))
	}
	data, _, _ := unstructured.NestedStringMap(config.Object, "data")
	ingress := map[string]any{}
	if err := json.Unmarshal([]byte(data["ingress"]), &ingress); err != nil {
		return 0, nil, fmt.Errorf("KServe's ingress configuration: %w", err)
	}
	ingress["disableIngressCreation"] = true
	b, _ := json.Marshal(ingress)
	data["ingress"], data["deploy"] = string(b), `{"defaultDeploymentMode": "Standard"}`
	if err := unstructured.SetNestedStringMap(config.Object, data, "data"); err != nil {
		return 0, nil, err
	}
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": kserveNamespace}}}
	if err := devcluster.Apply(ctx, cluster.Client, kserveNamespace, []*unstructured.Unstructured{ns, config}); err != nil {
		return 0, nil, err
	}
	probe, port, err := controllerAddrs()
	if err != nil {
		return 0, nil, err
	}
	return startController(ctx, "kserve", bin, []string{"--metrics-addr=0", "--health-probe-addr=" + probe, fmt.Sprintf("--webhook-port=%d", port)},
		[]string{"KUBECONFIG=" + cluster.Kubeconfig, "POD_NAMESPACE=" + kserveNamespace}, dir, probe)
}

// servingObserver observes isvcs, one pod each, a pod theirs by KServe's label.
func servingObserver(isvcs []*kservev1beta1.InferenceService) *observer {
	expected := map[string]int{}
	for _, i := range isvcs {
		expected[i.Name] = 1
	}
	o := newObserver(expected, true, "", func(p *corev1.Pod) string { return p.Labels[kserveLabel] })
	// An InferenceService is Ready no sooner than its Service exists: the apiserver makes
	// Services about one at a time (DECISIONS #21), so when they came is timed too.
	o.serviceOf = func(s *corev1.Service) string {
		if name := s.Labels[kserveLabel]; name != "" {
			return name
		}
		return s.Spec.Selector[kserveLabel]
	}
	return o
}

// observeInferenceServices is the observer of a serving run: a pod is its InferenceService's by
// KServe's label, and an InferenceService is done once Ready.
func observeInferenceServices(ctx context.Context, cfg *rest.Config, isvcs []*kservev1beta1.InferenceService) (*observer, error) {
	o := servingObserver(isvcs)
	return o, o.watch(ctx, cfg, []client.Object{&kservev1beta1.InferenceService{}}, func(obj any) {
		if i, ok := obj.(*kservev1beta1.InferenceService); ok {
			ready := meta.IsStatusConditionTrue(i.Status.Conditions, kservev1beta1.ConditionReady)
			o.jobChanged(i, meta.IsStatusConditionTrue(i.Status.Conditions, kservev1beta1.ConditionPredictorReady), ready,
				func() string { return fmt.Sprintf("%v", i.Status.Conditions) })
		}
	})
}

// servingMarkdown is the serving table: kiln next to KServe's controller, and their ratio.
func (r *Report) servingMarkdown() string {
	kiln, kserve := r.run(modeServing), r.run(modeKServe)
	p := r.Params
	var b strings.Builder
	fmt.Fprintf(&b, "J=%d InferenceServices of KServe's sklearn sample (serving.kserve.io/v1beta1, Standard mode, one replica each), each run on a fresh cluster, no admission webhooks; %s; %s\n\n",
		p.Jobs, r.Machine, r.Date.Format("2006-01-02"))
	r.runNotes(&b)
	for _, f := range []struct{ mode, name, what string }{
		{modeServingFloor, "The floor", fmt.Sprintf("no controller of InferenceServices; a client creates the Deployments and Services kiln made, %d in flight", p.Parallelism)},
		{modeServingSame, "The same-work floor", "as the floor, each Deployment and Service just after its InferenceService, on CRDs no controller serves"},
	} {
		if floor := r.run(f.mode); floor != nil && kiln != nil {
			fmt.Fprintf(&b, "%s (%s: %s): every pod exists %.1f s, every pod runs %.1f s, every Service exists %.1f s, every Deployment available %.1f s; kiln's Ready %.2f× that, its pods %.2f×; kube-apiserver %.1f CPU-s, kube-controller-manager %.1f CPU-s.\n\n",
				f.name, f.mode, f.what, floor.PodsExist, floor.AllRunning, floor.ServicesExist, floor.AllSucceeded, kiln.AllSucceeded/floor.AllSucceeded, kiln.AllRunning/floor.AllRunning,
				floor.ComponentCPU["kube-apiserver"], floor.ComponentCPU["kube-controller-manager"])
		}
	}
	comparison(&b, kserve, kiln, "KServe v0.20", "kiln", "kiln / KServe", []comparisonRow{
		{"every pod exists", "s", func(r *Result) float64 { return r.PodsExist }},
		{"every pod runs", "s", func(r *Result) float64 { return r.AllRunning }},
		{"every Service exists", "s", func(r *Result) float64 { return r.ServicesExist }},
		{"every InferenceService Ready", "s", func(r *Result) float64 { return r.AllSucceeded }},
		{"an InferenceService Ready after its pod runs, median", "s", func(r *Result) float64 { return r.DoneAfterRunning.P50 }},
		{"controller CPU (kiln, or KServe's)", "s", op(func(o *OperatorStats) float64 { return o.CPUSeconds })},
		{"controller peak memory", "MiB", op(func(o *OperatorStats) float64 { return o.PeakRSSMiB })},
		{"of it at the end: heap and stacks (RssAnon)", "MiB", op(func(o *OperatorStats) float64 { return o.AnonRSSMiB })},
		{"of it at the end: the program's file (RssFile)", "MiB", op(func(o *OperatorStats) float64 { return o.FileRSSMiB })},
		{"kube-apiserver CPU", "s", func(r *Result) float64 { return r.ComponentCPU["kube-apiserver"] }},
		{"kube-controller-manager CPU", "s", func(r *Result) float64 { return r.ComponentCPU["kube-controller-manager"] }},
	})
	return b.String()
}
