package kserve

import (
	"encoding/json"
	"fmt"
	"slices"

	kservev1beta1 "github.com/kiln-ml/kiln/api/serving.kserve.io/v1beta1"
)

// CanaryPredictor is the predictor a canary of spec.canary runs, as KServe v0.20 makes it: the
// InferenceService's predictor with every field the canary sets laid over it (objects field by
// field, lists whole; a field the canary leaves empty keeps the predictor's), named as the
// canary. A canary that gives its model in another form (another framework field, or model)
// replaces the predictor's model rather than adding a second. Its scaling fields are cleared: a
// canary's replicas are its share of the predictor's.
func CanaryPredictor(stable kservev1beta1.PredictorSpec, c kservev1beta1.CanaryPredictor) (kservev1beta1.PredictorSpec, error) {
	over := c.Spec
	over.Name = c.Name
	if forms := formsOf(&over); len(forms) > 0 && !slices.Equal(forms, formsOf(&stable)) {
		stable = *stable.DeepCopy()
		clearForms(&stable)
	}
	var base, top map[string]any
	if err := roundTrip(stable, &base); err != nil {
		return kservev1beta1.PredictorSpec{}, err
	}
	if err := roundTrip(over, &top); err != nil {
		return kservev1beta1.PredictorSpec{}, err
	}
	var out kservev1beta1.PredictorSpec
	if err := roundTrip(overlay(base, top), &out); err != nil {
		return kservev1beta1.PredictorSpec{}, fmt.Errorf("spec.canary predictor %s over spec.predictor: %w", c.Name, err)
	}
	out.MinReplicas, out.MaxReplicas, out.ScaleTarget, out.ScaleMetric, out.ScaleMetricType = nil, 0, nil, nil, nil
	out.AutoScaling, out.CanaryTrafficPercent = nil, nil
	return out, nil
}

// formsOf are the fields a predictor gives its model in: framework fields and model.
func formsOf(p *kservev1beta1.PredictorSpec) []string {
	forms := Frameworks(p)
	if p.Model != nil {
		forms = append(forms, "model")
	}
	return forms
}

// clearForms removes the predictor's model, in whichever form it gives it.
func clearForms(p *kservev1beta1.PredictorSpec) {
	p.SKLearn, p.XGBoost, p.Tensorflow, p.PyTorch, p.Triton = nil, nil, nil, nil, nil
	p.ONNX, p.HuggingFace, p.PMML, p.LightGBM, p.Paddle, p.Model = nil, nil, nil, nil, nil, nil
}

// roundTrip writes in as JSON and reads it into out.
func roundTrip(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// overlay lays top's non-empty values over base: objects merged key by key, anything else
// replaced.
func overlay(base, top map[string]any) map[string]any {
	if base == nil {
		base = map[string]any{}
	}
	for k, v := range top {
		switch t := v.(type) {
		case nil:
			continue
		case string:
			if t == "" {
				continue
			}
		case []any:
			if len(t) == 0 {
				continue
			}
		case map[string]any:
			if len(t) == 0 {
				continue
			}
			if b, ok := base[k].(map[string]any); ok {
				v = overlay(b, t)
			}
		}
		base[k] = v
	}
	return base
}
