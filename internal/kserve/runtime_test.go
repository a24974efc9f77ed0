package kserve

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kservev1alpha1 "github.com/kiln-ml/kiln/api/serving.kserve.io/v1alpha1"
	kservev1beta1 "github.com/kiln-ml/kiln/api/serving.kserve.io/v1beta1"
)

// rt builds a runtime: rt("name", "v1,v2").format("sklearn", "1", 1, true).
type rtb struct{ Runtime }

func rt(name, protocols string) *rtb {
	r := &rtb{Runtime{Name: name, Created: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}}
	for _, p := range strings.Split(protocols, ",") {
		if p != "" {
			r.Spec.ProtocolVersions = append(r.Spec.ProtocolVersions, kservev1alpha1.Protocol(p))
		}
	}
	return r
}

// format lists a format; version "" is none, priority 0 is unset.
func (r *rtb) format(name, version string, priority int32, autoSelect bool) *rtb {
	f := kservev1alpha1.SupportedModelFormat{Name: name, AutoSelect: ptr.To(autoSelect)}
	if version != "" {
		f.Version = ptr.To(version)
	}
	if priority != 0 {
		f.Priority = ptr.To(priority)
	}
	r.Spec.SupportedModelFormats = append(r.Spec.SupportedModelFormats, f)
	return r
}

func (r *rtb) created(day int) *rtb {
	r.Created = metav1.NewTime(time.Date(2026, 1, day, 0, 0, 0, 0, time.UTC))
	return r
}

func (r *rtb) cluster() *rtb { r.Cluster = true; return r }
func (r *rtb) disabled() *rtb {
	r.Spec.Disabled = ptr.To(true)
	return r
}
func (r *rtb) multiModel() *rtb {
	r.Spec.MultiModel = ptr.To(true)
	return r
}
func (r *rtb) workers() *rtb {
	r.Spec.WorkerSpec = &kservev1alpha1.WorkerSpec{}
	return r
}

func all(rs ...*rtb) []Runtime {
	out := make([]Runtime, len(rs))
	for i, r := range rs {
		out[i] = r.Runtime
	}
	return out
}

// kserveDefaults are KServe v0.20's cluster runtimes for the formats below, as its
// config/runtimes lists them.
func kserveDefaults() []Runtime {
	return all(
		rt("kserve-sklearnserver", "v1,v2").format("sklearn", "1", 1, true).cluster(),
		rt("kserve-xgbserver", "v1,v2").format("xgboost", "2", 1, true).cluster(),
		rt("kserve-predictiveserver", "v1,v2").format("sklearn", "1", 3, false).format("xgboost", "2", 3, false).cluster(),
		rt("kserve-mlserver", "v2").format("sklearn", "0", 2, true).format("sklearn", "1", 2, true).format("xgboost", "1", 2, true).format("xgboost", "2", 2, true).cluster(),
		rt("kserve-tritonserver", "v2,grpc-v2").format("tensorrt", "8", 1, true).format("onnx", "1", 1, true).format("triton", "2", 1, true).format("pytorch", "1", 0, false).cluster(),
		rt("kserve-tensorflow-serving", "v1,grpc-v1").format("tensorflow", "1", 2, true).format("tensorflow", "2", 2, true).cluster(),
		rt("kserve-torchserve", "v1,v2,grpc-v2").format("pytorch", "1", 2, true).cluster(),
	)
}

func model(format string) *kservev1beta1.ModelSpec {
	return &kservev1beta1.ModelSpec{ModelFormat: kservev1beta1.ModelFormat{Name: format}}
}

func withProtocol(m *kservev1beta1.ModelSpec, p string) *kservev1beta1.ModelSpec {
	m.ProtocolVersion = ptr.To(kservev1alpha1.Protocol(p))
	return m
}

func withVersion(m *kservev1beta1.ModelSpec, v string) *kservev1beta1.ModelSpec {
	m.ModelFormat.Version = ptr.To(v)
	return m
}

func withRuntime(m *kservev1beta1.ModelSpec, r string) *kservev1beta1.ModelSpec {
	m.Runtime = ptr.To(r)
	return m
}

func TestPickFollowsKServesRules(t *testing.T) {
	for _, tc := range []struct {
		name       string
		model      *kservev1beta1.ModelSpec
		namespaced []Runtime
		cluster    []Runtime
		want       string
		wantReason kservev1beta1.FailureReason
		wantIn     string // a part of the refusal's message
	}{
		{name: "a v1 sklearn model: sklearnserver (mlserver speaks v2 only, predictiveserver is not auto-selected)",
			model: model("sklearn"), cluster: kserveDefaults(), want: "kserve-sklearnserver"},
		{name: "a v2 sklearn model: mlserver, of higher priority",
			model: withProtocol(model("sklearn"), "v2"), cluster: kserveDefaults(), want: "kserve-mlserver"},
		{name: "a format version only one runtime lists",
			model: withProtocol(withVersion(model("sklearn"), "0"), "v2"), cluster: kserveDefaults(), want: "kserve-mlserver"},
		{name: "a format version no runtime lists",
			model: withVersion(model("sklearn"), "9"), cluster: kserveDefaults(),
			wantReason: kservev1beta1.NoSupportingRuntime, wantIn: "model format sklearn version 9 with protocol v1"},
		{name: "onnx at v2: Triton", model: withProtocol(model("onnx"), "v2"), cluster: kserveDefaults(), want: "kserve-tritonserver"},
		{name: "onnx at v1 (the model form's default): none",
			model: model("onnx"), cluster: kserveDefaults(), wantReason: kservev1beta1.NoSupportingRuntime, wantIn: "onnx"},
		{name: "pytorch: torchserve, Triton lists it without autoSelect",
			model: model("pytorch"), cluster: kserveDefaults(), want: "kserve-torchserve"},
		{name: "a namespace's runtime before the cluster's, whatever the priorities",
			model: model("sklearn"), namespaced: all(rt("mine", "").format("sklearn", "", 0, true)), cluster: kserveDefaults(), want: "mine"},
		{name: "disabled, multi-model and multi-node runtimes are not picked",
			model:      model("sklearn"),
			namespaced: all(rt("off", "").format("sklearn", "", 9, true).disabled(), rt("mm", "").format("sklearn", "", 9, true).multiModel(), rt("mn", "").format("sklearn", "", 9, true).workers()),
			cluster:    kserveDefaults(), want: "kserve-sklearnserver"},
		{name: "a priority before none",
			model: model("sklearn"), namespaced: all(rt("a", "v1").format("sklearn", "", 0, true), rt("b", "v1").format("sklearn", "", 1, true)), want: "b"},
		{name: "equal priorities: the lowest protocol first",
			model: withProtocol(model("sklearn"), "v2"), namespaced: all(rt("a", "v2").format("sklearn", "", 1, true), rt("b", "v1,v2").format("sklearn", "", 1, true)), want: "b"},
		{name: "then the newest",
			model: model("sklearn"), namespaced: all(rt("a", "v1").format("sklearn", "", 1, true).created(1), rt("b", "v1").format("sklearn", "", 1, true).created(2)), want: "b"},
		{name: "then the name",
			model: model("sklearn"), namespaced: all(rt("b", "v1").format("sklearn", "", 1, true), rt("a", "v1").format("sklearn", "", 1, true)), want: "a"},
		{name: "a runtime listing no protocol speaks every protocol",
			model: withProtocol(model("custom"), "grpc-v1"), namespaced: all(rt("any", "").format("custom", "", 0, true)), want: "any"},
		{name: "named: found in the namespace before the cluster",
			model:      withRuntime(model("sklearn"), "kserve-sklearnserver"),
			namespaced: all(rt("kserve-sklearnserver", "v1").format("sklearn", "", 0, false)), cluster: kserveDefaults(), want: "kserve-sklearnserver"},
		{name: "named: autoSelect is not needed",
			model: withRuntime(model("sklearn"), "kserve-predictiveserver"), cluster: kserveDefaults(), want: "kserve-predictiveserver"},
		{name: "named: missing",
			model: withRuntime(model("sklearn"), "nope"), cluster: kserveDefaults(),
			wantReason: kservev1beta1.RuntimeNotRecognized, wantIn: `no ServingRuntime "nope"`},
		{name: "named: disabled",
			model: withRuntime(model("sklearn"), "off"), namespaced: all(rt("off", "").format("sklearn", "", 0, true).disabled()),
			wantReason: kservev1beta1.RuntimeDisabled, wantIn: "ServingRuntime off is disabled"},
		{name: "named: another protocol",
			model: withProtocol(withRuntime(model("sklearn"), "kserve-mlserver"), "v1"), cluster: kserveDefaults(),
			wantReason: kservev1beta1.NoSupportingRuntime, wantIn: "ClusterServingRuntime kserve-mlserver does not speak v1 (it speaks v2)"},
		{name: "named: another format",
			model: withRuntime(model("onnx"), "kserve-sklearnserver"), cluster: kserveDefaults(),
			wantReason: kservev1beta1.NoSupportingRuntime, wantIn: "does not serve model format onnx"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Pick(tc.model, tc.namespaced, tc.cluster)
			if tc.wantReason != "" {
				var no *Failure
				if !errors.As(err, &no) || no.Reason != tc.wantReason || !strings.Contains(no.Message, tc.wantIn) {
					t.Fatalf("Pick = %q, %v; want a %s refusal saying %q", got.Name, err, tc.wantReason, tc.wantIn)
				}
				return
			}
			if err != nil || got.Name != tc.want {
				t.Fatalf("Pick = %q, %v; want %q", got.Name, err, tc.want)
			}
			if inNamespace := slices.ContainsFunc(tc.namespaced, func(r Runtime) bool { return r.Name == tc.want }); got.Cluster == inNamespace {
				t.Errorf("Pick = %s (cluster %t), want the namespace's when it has one", got.Name, got.Cluster)
			}
		})
	}
}

func TestProtocolIsTheModelsOrTheRuntimesLowest(t *testing.T) {
	r := rt("r", "grpc-v2,v2").Runtime
	if got := Protocol(model("x"), r); got != kservev1alpha1.ProtocolV2 {
		t.Errorf("Protocol of a model without one on a v2/grpc-v2 runtime = %q, want v2", got)
	}
	if got := Protocol(withProtocol(model("x"), "grpc-v2"), r); got != kservev1alpha1.ProtocolGRPCV2 {
		t.Errorf("Protocol of a grpc-v2 model = %q, want grpc-v2", got)
	}
	if got := Protocol(model("x"), rt("any", "").Runtime); got != "" {
		t.Errorf("Protocol where neither says = %q, want none", got)
	}
}

func TestModelOfAShorthandIsAModelOfItsFormat(t *testing.T) {
	uri := "gs://kfserving-examples/models/sklearn/1.0/model"
	for _, tc := range []struct {
		name      string
		predictor kservev1beta1.PredictorSpec
		format    string
		protocol  string // "" for none
	}{
		{"sklearn", kservev1beta1.PredictorSpec{SKLearn: &kservev1beta1.PredictorExtensionSpec{StorageURI: &uri}}, "sklearn", ""},
		{"onnx shorthand: v2", kservev1beta1.PredictorSpec{ONNX: &kservev1beta1.PredictorExtensionSpec{StorageURI: &uri}}, "onnx", "v2"},
		{"huggingface shorthand: v2", kservev1beta1.PredictorSpec{HuggingFace: &kservev1beta1.PredictorExtensionSpec{}}, "huggingface", "v2"},
		{"triton shorthand: v2", kservev1beta1.PredictorSpec{Triton: &kservev1beta1.PredictorExtensionSpec{}}, "triton", "v2"},
		{"onnx model form: none", kservev1beta1.PredictorSpec{Model: model("onnx")}, "onnx", ""},
		{"vLLM model form: v2", kservev1beta1.PredictorSpec{Model: model("vLLM")}, "vLLM", "v2"},
		{"a protocol given stays", kservev1beta1.PredictorSpec{Triton: &kservev1beta1.PredictorExtensionSpec{ProtocolVersion: ptr.To(kservev1alpha1.ProtocolGRPCV2)}}, "triton", "grpc-v2"},
		// KServe's defaulting webhook writes the shorthand's model over the one given.
		{"sklearn beside model: sklearn", kservev1beta1.PredictorSpec{SKLearn: &kservev1beta1.PredictorExtensionSpec{StorageURI: &uri}, Model: model("xgboost")}, "sklearn", ""},
		{"onnx beside model: onnx, v2", kservev1beta1.PredictorSpec{ONNX: &kservev1beta1.PredictorExtensionSpec{StorageURI: &uri}, Model: model("sklearn")}, "onnx", "v2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.predictor.DeepCopy()
			m := ModelOf(&tc.predictor)
			if m == nil || m.ModelFormat.Name != tc.format {
				t.Fatalf("ModelOf = %+v, want a model of format %s", m, tc.format)
			}
			if got := string(ptr.Deref(m.ProtocolVersion, "")); got != tc.protocol {
				t.Errorf("protocol = %q, want %q", got, tc.protocol)
			}
			if tc.predictor.SKLearn != nil && ptr.Deref(m.StorageURI, "") != uri {
				t.Errorf("storageUri = %v, want the shorthand's", m.StorageURI)
			}
			if tc.predictor.Model != nil && tc.predictor.Model.ProtocolVersion != before.Model.ProtocolVersion {
				t.Errorf("ModelOf changed the predictor")
			}
		})
	}
	if m := ModelOf(&kservev1beta1.PredictorSpec{}); m != nil {
		t.Errorf("ModelOf a custom predictor = %+v, want nil", m)
	}
	p := kservev1beta1.PredictorSpec{XGBoost: &kservev1beta1.PredictorExtensionSpec{}, SKLearn: &kservev1beta1.PredictorExtensionSpec{}}
	if got := Frameworks(&p); strings.Join(got, ",") != "xgboost,sklearn" {
		t.Errorf("Frameworks = %v, want xgboost,sklearn (KServe's order)", got)
	}
}
