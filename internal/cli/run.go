package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// DefaultImage is the image a run uses without --image: the PyTorch image kiln's PyJob samples use.
const DefaultImage = "pytorch/pytorch:2.0-cuda11.7-cudnn8-devel"

// outputPath is where a run's --output storage is mounted (OUTPUT_PATH).
const outputPath = "/mnt/output"

type runOptions struct {
	name, image, dataset, output, dryRun, format string
	gpus, workers, backoffLimit                  int32
	env, labels, annotations                     []string
	follow                                       bool
}

func (s *session) runCommand() *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run SCRIPT.py [-- ARGS...]",
		Short: "Run a local Python script as a PyJob; with --follow, its logs until it ends, and its exit code",
		Example: `  kubectl kiln run train.py --gpus 1 --follow
  kubectl kiln run train.py --workers 4 --dataset imagenet:/data --output 20Gi -- --epochs 3
  kubectl kiln run train.py --dry-run=client -o yaml`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return s.run(cmd.Context(), args[0], args[1:], o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.name, "name", "", "the PyJob's name (default: the script's, with a random suffix)")
	f.StringVar(&o.image, "image", DefaultImage, "the image the script runs in")
	f.Int32Var(&o.gpus, "gpus", 0, "GPUs per worker")
	f.Int32Var(&o.workers, "workers", 1, "workers (pods); more than one runs it distributed")
	f.Int32Var(&o.backoffLimit, "backoff-limit", -1, "retries of failed pods before the run fails (default: the PyJob's, 6)")
	f.StringVar(&o.dataset, "dataset", "", "CLAIM:PATH, an existing claim holding the data, mounted at PATH (DATASET_PATH)")
	f.StringVar(&o.output, "output", "", "SIZE of a claim for the results, kept after the run, at "+outputPath+" (OUTPUT_PATH)")
	f.StringArrayVar(&o.env, "env", nil, "NAME=VALUE for the script's environment (repeatable)")
	f.StringArrayVar(&o.labels, "label", nil, "KEY=VALUE, a label of the PyJob (repeatable): kueue.x-k8s.io/queue-name=team-a")
	f.StringArrayVar(&o.annotations, "annotation", nil, "KEY=VALUE, an annotation of the PyJob and its pods (repeatable)")
	f.BoolVarP(&o.follow, "follow", "f", false, "follow the run's logs until it ends; exit with its result (0 when it succeeded)")
	f.StringVar(&o.dryRun, "dry-run", "none", "client: print the PyJob, create nothing")
	f.StringVarP(&o.format, "output-format", "o", "", "with --dry-run=client: yaml or json")
	return cmd
}

// pyJobFor is the PyJob that runs script (its source) as o says, in namespace ns.
func pyJobFor(scriptPath, script string, args []string, ns string, o runOptions) (*unstructured.Unstructured, error) {
	spec := map[string]any{"image": o.image, "script": script}
	if len(args) > 0 {
		anyArgs := make([]any, len(args))
		for i, a := range args {
			anyArgs[i] = a
		}
		spec["args"] = anyArgs
	}
	if o.workers != 1 {
		spec["workers"] = int64(o.workers)
	}
	if o.backoffLimit >= 0 {
		spec["backoffLimit"] = int64(o.backoffLimit)
	}
	if o.gpus > 0 {
		spec["gpus"] = map[string]any{"count": int64(o.gpus)}
	}
	if o.dataset != "" {
		claim, path, ok := strings.Cut(o.dataset, ":")
		if !ok || claim == "" || !strings.HasPrefix(path, "/") {
			return nil, fmt.Errorf("--dataset %q: give CLAIM:PATH, an existing claim and the absolute path to mount it at (imagenet:/data)", o.dataset)
		}
		spec["dataset"] = map[string]any{"claimName": claim, "path": path}
	}
	if o.output != "" {
		if _, err := resource.ParseQuantity(o.output); err != nil {
			return nil, fmt.Errorf("--output %q: give the claim's size, as 20Gi", o.output)
		}
		spec["output"] = map[string]any{"size": o.output, "path": outputPath}
	}
	var env []any
	for _, e := range o.env {
		name, value, ok := strings.Cut(e, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("--env %q: give NAME=VALUE", e)
		}
		env = append(env, map[string]any{"name": name, "value": value})
	}
	if env != nil {
		spec["env"] = env
	}
	meta := map[string]any{"namespace": ns}
	for field, pairs := range map[string][]string{"labels": o.labels, "annotations": o.annotations} {
		if len(pairs) == 0 {
			continue
		}
		m := map[string]any{}
		for _, kv := range pairs {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("--%s %q: give KEY=VALUE", strings.TrimSuffix(field, "s"), kv)
			}
			m[k] = v
		}
		meta[field] = m
	}
	if o.name != "" {
		meta["name"] = o.name
	} else {
		meta["generateName"] = nameFrom(scriptPath) + "-"
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": pyJob().gvr.GroupVersion().String(), "kind": "PyJob", "metadata": meta, "spec": spec}}, nil
}

var notInName = regexp.MustCompile(`[^a-z0-9-]+`)

// nameFrom is a PyJob name's start from a script's file name: train_mnist.py gives train-mnist.
func nameFrom(path string) string {
	base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	n := strings.Trim(notInName.ReplaceAllString(strings.ToLower(base), "-"), "-")
	if len(n) > 40 {
		n = strings.Trim(n[:40], "-")
	}
	if n == "" || n[0] < 'a' || n[0] > 'z' {
		n = "run-" + n
	}
	return strings.TrimSuffix(n, "-")
}

func pyJob() kind {
	for _, k := range kinds {
		if k.name == "PyJob" {
			return k
		}
	}
	panic("kiln has no PyJob kind")
}

// run creates the PyJob for the script and, with --follow, follows it to its end.
func (s *session) run(ctx context.Context, scriptPath string, args []string, o runOptions) error {
	src, err := os.ReadFile(scriptPath)
	if err != nil {
		return fmt.Errorf("reading the script: %w", err)
	}
	ns := s.namespace()
	obj, err := pyJobFor(scriptPath, string(src), args, ns, o)
	if err != nil {
		return err
	}
	switch o.dryRun {
	case "client":
		format := o.format
		if format == "" {
			format = "yaml"
		}
		if format != "yaml" && format != "json" {
			return fmt.Errorf("-o %s: a dry run prints yaml or json", format)
		}
		return printObject(s.Out, format, obj)
	case "none", "":
	default:
		return fmt.Errorf("--dry-run=%s: only client is served (print the PyJob, create nothing)", o.dryRun)
	}
	if err := s.connect(); err != nil {
		return err
	}
	k := pyJob()
	created, err := s.dyn.Resource(k.gvr).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating the PyJob: %w", err)
	}
	j := job{kind: k, obj: created}
	fmt.Fprintf(s.Out, "%s created\n", j.ref())
	if !o.follow {
		fmt.Fprintf(s.Out, "follow it: kubectl kiln logs %s -n %s -f\n", j.ref(), ns)
		return nil
	}
	if err := s.logs(ctx, j, logOptions{follow: true}); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return &Exit{Code: 130, Message: fmt.Sprintf("%s keeps running: follow it again with kubectl kiln logs %s -n %s -f, stop it with kubectl kiln delete %s -n %s",
			j.ref(), j.ref(), ns, j.ref(), ns)}
	}
	sum, _, err := s.now(ctx, &j)
	if err != nil {
		return err
	}
	switch {
	case sum.failed:
		return &Exit{Code: 1, Message: fmt.Sprintf("%s failed: %s", j.ref(), orNone(oneLine(sum.why)))}
	case sum.state != "Succeeded": // deleted meanwhile
		return &Exit{Code: 1, Message: fmt.Sprintf("%s ended %s, without succeeding", j.ref(), strings.ToLower(sum.state))}
	}
	fmt.Fprintf(s.Out, "%s %s\n", j.ref(), strings.ToLower(sum.state))
	return nil
}

// Exit is an error that ends the command with its own exit code.
type Exit struct {
	Code    int
	Message string
}

func (e *Exit) Error() string { return e.Message }

// Report writes what err says to w (an *Exit's message as it is, any other after "error: ")
// and returns the exit code it asks for: an *Exit's, 1 for any other error, 0 for none.
func Report(w io.Writer, err error) int {
	var e *Exit
	switch {
	case err == nil:
		return 0
	case errors.As(err, &e):
		fmt.Fprintln(w, e.Message)
		return e.Code
	}
	fmt.Fprintln(w, "error:", err)
	return 1
}
