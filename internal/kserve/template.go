package kserve

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"text/template/parse"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// templateForms are the template actions fillTemplates fills, for its errors. index takes its
// key in backquotes: the template is the container written as JSON, where a double quote reads \".
const templateForms = "{{.Name}}, {{.Namespace}}, {{.Labels.<key>}}, {{.Annotations.<key>}}, {{index .Labels `<key>`}} " +
	"and the metadata's GenerateName, UID, ResourceVersion and Generation"

// fillTemplates fills the container, written as JSON, as a Go template of the InferenceService's
// metadata, as KServe does. A label or an annotation that is not there fills as "" (KServe's
// text/template writes "<no value>").
//
// kiln walks the template's parse tree itself rather than run text/template's executor: that
// executor looks methods up by name at run time, so the linker must keep every exported method
// of every type in the program. Without it kiln's code and tables are a fifth smaller, and so
// is the part of them that stays resident (docs/decisions.md, 22). The cost: only the actions
// KServe's runtimes use fill (templateForms); any other (if, range, pipes, variables, functions
// but index) is refused, named.
func fillTemplates(c *corev1.Container, meta metav1.ObjectMeta) error {
	raw, err := json.Marshal(c)
	if err != nil {
		return err
	}
	tree := parse.New(c.Name)
	tree.Mode = parse.SkipFuncCheck
	if _, err := tree.Parse(string(raw), "", "", map[string]*parse.Tree{}); err != nil {
		return err
	}
	var out strings.Builder
	if err := fillList(&out, tree.Root, meta); err != nil {
		return err
	}
	var filled corev1.Container
	if err := json.Unmarshal([]byte(out.String()), &filled); err != nil {
		return fmt.Errorf("the filled container is not a container: %w", err)
	}
	*c = filled
	return nil
}

func fillList(out *strings.Builder, list *parse.ListNode, meta metav1.ObjectMeta) error {
	for _, n := range list.Nodes {
		switch n := n.(type) {
		case *parse.TextNode:
			out.Write(n.Text)
		case *parse.ActionNode:
			v, err := action(n, meta)
			if err != nil {
				return err
			}
			out.WriteString(v)
		default:
			return refused(n)
		}
	}
	return nil
}

// action is the value of {{.Field}}, {{.Map.key}} or {{index .Map "key"}}.
func action(n *parse.ActionNode, meta metav1.ObjectMeta) (string, error) {
	if len(n.Pipe.Decl) > 0 || len(n.Pipe.Cmds) != 1 {
		return "", refused(n)
	}
	args := n.Pipe.Cmds[0].Args
	switch {
	case len(args) == 1:
		if f, ok := args[0].(*parse.FieldNode); ok {
			return field(f.Ident, meta, n)
		}
	case len(args) == 3:
		fn, isIdent := args[0].(*parse.IdentifierNode)
		m, isField := args[1].(*parse.FieldNode)
		key, isString := args[2].(*parse.StringNode)
		if isIdent && fn.Ident == "index" && isField && isString && len(m.Ident) == 1 {
			return field([]string{m.Ident[0], key.Text}, meta, n)
		}
	}
	return "", refused(n)
}

// field is the value of the metadata's field path: a field, or a key of Labels or Annotations.
func field(path []string, meta metav1.ObjectMeta, n parse.Node) (string, error) {
	if len(path) == 2 {
		switch path[0] {
		case "Labels":
			return meta.Labels[path[1]], nil
		case "Annotations":
			return meta.Annotations[path[1]], nil
		}
	}
	if len(path) == 1 {
		switch path[0] {
		case "Name":
			return meta.Name, nil
		case "Namespace":
			return meta.Namespace, nil
		case "GenerateName":
			return meta.GenerateName, nil
		case "UID":
			return string(meta.UID), nil
		case "ResourceVersion":
			return meta.ResourceVersion, nil
		case "Generation":
			return strconv.FormatInt(meta.Generation, 10), nil
		}
	}
	return "", fmt.Errorf("%s: kiln does not fill .%s; it fills %s", n, strings.Join(path, "."), templateForms)
}

// refused says which action does not fill: its start, for an if or a range holds the rest of
// the container.
func refused(n parse.Node) error {
	action := n.String()
	if len(action) > 60 {
		cut := 60
		for !utf8.RuneStart(action[cut]) {
			cut--
		}
		action = action[:cut] + "…"
	}
	return fmt.Errorf("%s: kiln fills %s, not this action; write the value into the container instead", action, templateForms)
}
