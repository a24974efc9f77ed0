package kserve

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"text/template"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// templateMeta is an InferenceService's metadata the template tests fill from.
var templateMeta = metav1.ObjectMeta{Name: "iris", Namespace: "team-a", Generation: 3, UID: "u-1",
	Labels:      map[string]string{"modelClass": "mlserver_sklearn.SKLearnModel", "app.kubernetes.io/part-of": "demo"},
	Annotations: map[string]string{"modelFormat": "sklearn"}}

// executed is the container filled by text/template's executor, with missingkey=zero, as kiln
// filled it before decision 22; ok is false when the executor fails.
func executed(t *testing.T, c corev1.Container, meta metav1.ObjectMeta) (corev1.Container, bool) {
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := template.New(c.Name).Option("missingkey=zero").Parse(string(raw))
	if err != nil {
		return c, false
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, meta); err != nil {
		return c, false
	}
	var filled corev1.Container
	if err := json.Unmarshal(out.Bytes(), &filled); err != nil {
		return c, false
	}
	return filled, true
}

func TestFillTemplatesFillsTheMetadata(t *testing.T) {
	for _, tc := range []struct{ arg, want string }{
		{"--model_name={{.Name}}", "--model_name=iris"},
		{"{{ .Namespace }}/{{.Name}}", "team-a/iris"},
		{"{{.Labels.modelClass}}", "mlserver_sklearn.SKLearnModel"},
		{"{{.Annotations.modelFormat}}", "sklearn"},
		{"{{index .Labels `app.kubernetes.io/part-of`}}", "demo"},
		{"[{{.Labels.missing}}]", "[]"},
		{"{{- /* a comment */ -}} g{{.Generation}} {{.UID}}", "g3 u-1"},
		{"no template", "no template"},
	} {
		c := corev1.Container{Name: ContainerName, Args: []string{tc.arg}}
		want, _ := executed(t, c, templateMeta)
		if err := fillTemplates(&c, templateMeta); err != nil {
			t.Errorf("%s: %v", tc.arg, err)
			continue
		}
		if c.Args[0] != tc.want || want.Args[0] != tc.want {
			t.Errorf("%s filled as %q (text/template: %q), want %q", tc.arg, c.Args[0], want.Args[0], tc.want)
		}
	}
	none := corev1.Container{Name: ContainerName, Env: []corev1.EnvVar{{Name: "CLASS", Value: "{{.Labels.modelClass}}"}}}
	if err := fillTemplates(&none, metav1.ObjectMeta{Name: "bare"}); err != nil || none.Env[0].Value != "" {
		t.Errorf("a label of an InferenceService without labels filled as %q (%v), want \"\"", none.Env[0].Value, err)
	}
}

func TestFillTemplatesNamesWhatItDoesNotFill(t *testing.T) {
	for _, tc := range []struct{ arg, want string }{
		{"{{if .Name}}x{{end}}", "{{if .Name}}x{{end}}: kiln fills"},
		{"{{range .Labels}}" + strings.Repeat("x", 100) + "{{end}}", "{{range .Labels}}xxx"},
		{"{{.Name | len}}", "{{.Name | len}}"},
		{"{{printf .Name}}", "not this action"},
		{"{{index .Labels .Name}}", "not this action"},
		{"{{$n := .Name}}", "not this action"},
		{"{{.Labels}}", "kiln does not fill .Labels;"},
		{"{{.OwnerReferences}}", "kiln does not fill .OwnerReferences"},
		{"{{.Labels.a.b}}", "kiln does not fill .Labels.a.b"},
		{`{{index .Labels "a"}}`, `unexpected "\\" in operand`}, // JSON writes the quote as \"; KServe's templates fail alike
	} {
		c := corev1.Container{Name: ContainerName, Args: []string{tc.arg}}
		err := fillTemplates(&c, templateMeta)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.arg, err, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), "in operand") && !strings.Contains(err.Error(), "{{.Name}}, {{.Namespace}}") {
			t.Errorf("%s: error %v does not say which templates fill", tc.arg, err)
		}
		if len(err.Error()) > 400 {
			t.Errorf("%s: error of %d bytes; an action is named by its start", tc.arg, len(err.Error()))
		}
	}
}

// FuzzFillTemplatesFillsAsTextTemplate: whatever template fillTemplates fills, text/template's
// executor fills the same (with missingkey=zero).
func FuzzFillTemplatesFillsAsTextTemplate(f *testing.F) {
	for _, s := range []string{"{{.Name}}", "a{{- .Labels.modelClass -}} b", "{{index .Annotations `modelFormat`}}",
		"{{/* c */}}{{.Generation}}", "{{.Labels.x}}", "{{if .Name}}{{end}}", "{{.Name}}{{.Namespace}}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, arg string) {
		c := corev1.Container{Name: ContainerName, Args: []string{arg}, Env: []corev1.EnvVar{{Name: "E", Value: arg}}}
		want, executes := executed(t, c, templateMeta)
		if err := fillTemplates(&c, templateMeta); err != nil {
			return
		}
		if !executes {
			t.Fatalf("%q: kiln fills it as %q, text/template's executor fails on it", arg, c.Args)
		}
		if !equalContainers(c, want) {
			t.Fatalf("%q: kiln fills it as %+v, text/template as %+v", arg, c, want)
		}
	})
}

func equalContainers(a, b corev1.Container) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}
