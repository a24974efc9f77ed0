// Package kserve holds the meaning of KServe's serving.kserve.io API: which model a predictor
// serves (a framework shorthand is a model of that format) and which ServingRuntime serves it,
// by KServe v0.20's rules. It reads no cluster: callers pass the runtimes they see.
package kserve

import (
	kservev1alpha1 "github.com/kiln-ml/kiln/api/serving.kserve.io/v1alpha1"
	kservev1beta1 "github.com/kiln-ml/kiln/api/serving.kserve.io/v1beta1"
)

// shorthands are the framework fields of a predictor, in the order KServe looks at them, with
// the model format each one means.
var shorthands = []struct {
	format string
	of     func(*kservev1beta1.PredictorSpec) *kservev1beta1.PredictorExtensionSpec
}{
	{"xgboost", func(p *kservev1beta1.PredictorSpec) *kservev1beta1.PredictorExtensionSpec { return p.XGBoost }},
	{"pytorch", func(p *kservev1beta1.PredictorSpec) *kservev1beta1.PredictorExtensionSpec { return p.PyTorch }},
	{"triton", func(p *kservev1beta1.PredictorSpec) *kservev1beta1.PredictorExtensionSpec { return p.Triton }},
	{"sklearn", func(p *kservev1beta1.PredictorSpec) *kservev1beta1.PredictorExtensionSpec { return p.SKLearn }},
	{"tensorflow", func(p *kservev1beta1.PredictorSpec) *kservev1beta1.PredictorExtensionSpec { return p.Tensorflow }},
	{"onnx", func(p *kservev1beta1.PredictorSpec) *kservev1beta1.PredictorExtensionSpec { return p.ONNX }},
	{"pmml", func(p *kservev1beta1.PredictorSpec) *kservev1beta1.PredictorExtensionSpec { return p.PMML }},
	{"lightgbm", func(p *kservev1beta1.PredictorSpec) *kservev1beta1.PredictorExtensionSpec { return p.LightGBM }},
	{"paddle", func(p *kservev1beta1.PredictorSpec) *kservev1beta1.PredictorExtensionSpec { return p.Paddle }},
	{"huggingface", func(p *kservev1beta1.PredictorSpec) *kservev1beta1.PredictorExtensionSpec { return p.HuggingFace }},
}

// The formats whose models speak the V2 protocol unless they say otherwise, as KServe's defaulting
// has it: for the shorthands, and for the model form (an onnx model in the model form is v1).
var (
	shorthandV2 = map[string]bool{"triton": true, "onnx": true, "huggingface": true}
	modelV2     = map[string]bool{"triton": true, "vLLM": true}
)

// Frameworks lists the framework shorthands a predictor has set, in KServe's order.
func Frameworks(p *kservev1beta1.PredictorSpec) []string {
	var set []string
	for _, s := range shorthands {
		if s.of(p) != nil {
			set = append(set, s.format)
		}
	}
	return set
}

// ModelOf is the model a predictor serves: its framework shorthand as a model of that format, or
// its model form, with the protocol KServe defaults for the format. A shorthand beside model wins,
// as KServe's defaulting webhook writes the shorthand's model over the one given. It is nil for
// a custom predictor (containers only). The predictor is not changed.
func ModelOf(p *kservev1beta1.PredictorSpec) *kservev1beta1.ModelSpec {
	var m *kservev1beta1.ModelSpec
	v2 := shorthandV2
	for _, s := range shorthands {
		if ext := s.of(p); ext != nil {
			m = &kservev1beta1.ModelSpec{ModelFormat: kservev1beta1.ModelFormat{Name: s.format}, PredictorExtensionSpec: *ext.DeepCopy()}
			break
		}
	}
	if m == nil && p.Model != nil {
		m, v2 = p.Model.DeepCopy(), modelV2
	}
	if m == nil {
		return nil
	}
	if m.ProtocolVersion == nil && v2[m.ModelFormat.Name] {
		proto := kservev1alpha1.ProtocolV2
		m.ProtocolVersion = &proto
	}
	return m
}

// protocolOf is the protocol a runtime is picked for: the model's, or v1.
func protocolOf(m *kservev1beta1.ModelSpec) kservev1alpha1.Protocol {
	if m.ProtocolVersion != nil {
		return *m.ProtocolVersion
	}
	return kservev1alpha1.ProtocolV1
}
