package kserve

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestFillTemplatesFillsTheMetadataAsKServeDoes(t *testing.T) {
	meta := metav1.ObjectMeta{Name: "iris", Namespace: "team-a", Generation: 3,
		Labels:      map[string]string{"modelClass": "mlserver_sklearn.SKLearnModel", "app.kubernetes.io/part-of": "demo"},
		Annotations: map[string]string{"modelFormat": "sklearn"}}
	for _, tc := range []struct{ arg, want string }{
		{"--model_name={{.Name}}", "--model_name=iris"},
		{"{{ .Namespace }}/{{.Name}}", "team-a/iris"},
		{"{{.Labels.modelClass}}", "mlserver_sklearn.SKLearnModel"},
		{"{{.Annotations.modelFormat}}", "sklearn"},
		{"{{index .Labels `app.kubernetes.io/part-of`}}", "demo"},
		{"[{{.Labels.missing}}]", "[]"},
		{"{{- /* a comment */ -}} g{{.Generation}}", "g3"},
		{"no template", "no template"},
	} {
		c := corev1.Container{Name: ContainerName, Args: []string{tc.arg}}
		if err := fillTemplates(&c, meta); err != nil {
			t.Errorf("%s: %v", tc.arg, err)
			continue
		}
		if c.Args[0] != tc.want {
			t.Errorf("%s filled as %q, want %q", tc.arg, c.Args[0], tc.want)
		}
	}
	none := corev1.Container{Name: ContainerName, Env: []corev1.EnvVar{{Name: "CLASS", Value: "{{.Labels.modelClass}}"}}}
	if err := fillTemplates(&none, metav1.ObjectMeta{Name: "bare"}); err != nil || none.Env[0].Value != "" {
		t.Errorf("a label of an InferenceService without labels filled as %q (%v), want \"\"", none.Env[0].Value, err)
	}
}

func TestFillTemplatesNamesWhatItDoesNotFill(t *testing.T) {
	meta := metav1.ObjectMeta{Name: "iris", Labels: map[string]string{"a": "b"}}
	for _, tc := range []struct{ arg, want string }{
		{"{{if .Name}}x{{end}}", "{{if .Name}}"},
		{"{{.Name | len}}", "{{.Name | len}}"},
		{"{{printf .Name}}", "not this action"},
		{"{{index .Labels .Name}}", "not this action"},
		{"{{$n := .Name}}", "not this action"},
		{"{{.Labels}}", "no field .Labels that fills as text"},
		{"{{.OwnerReferences}}", "no field .OwnerReferences"},
		{"{{.Labels.a.b}}", "no field .Labels.a.b"},
		{`{{index .Labels "a"}}`, `unexpected "\\" in operand`}, // JSON writes the quote as \"; KServe's templates fail alike
	} {
		c := corev1.Container{Name: ContainerName, Args: []string{tc.arg}}
		err := fillTemplates(&c, meta)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.arg, err, tc.want)
		}
		if err != nil && !strings.Contains(err.Error(), "in operand") && !strings.Contains(err.Error(), "{{.Name}}, {{.Namespace}}") {
			t.Errorf("%s: error %v does not say which templates fill", tc.arg, err)
		}
	}
}
