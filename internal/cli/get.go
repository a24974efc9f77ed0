package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"

	"github.com/kiln-ml/kiln/internal/stuck"
)

// pollEvery is how often -w and the waits read the cluster again.
const pollEvery = time.Second

func (s *session) getCommand() *cobra.Command {
	var allNamespaces, watch bool
	var output string
	cmd := &cobra.Command{
		Use:   "get [KIND|all]",
		Short: "Every kiln job and InferenceService in one table: state, replicas ready, age, and why it waits",
		Example: `  kubectl kiln get
  kubectl kiln get pytorchjobs -A
  kubectl kiln get -w`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			typed := ""
			if len(args) == 1 {
				typed = args[0]
			}
			ks, err := kindsNamed(typed)
			if err != nil {
				return err
			}
			if err := s.connect(); err != nil {
				return err
			}
			ns := s.namespace()
			if allNamespaces {
				ns = ""
			}
			t := table{wide: output == "wide", allNamespaces: allNamespaces}
			if !watch {
				served, err := s.served(ks)
				if err != nil {
					return err
				}
				rows, jobs, err := s.rows(cmd.Context(), served, ns)
				if err != nil {
					return err
				}
				switch output {
				case "", "wide":
					return t.print(s.Out, rows)
				case "name":
					for _, j := range jobs {
						fmt.Fprintln(s.Out, j.ref())
					}
					return nil
				case "json", "yaml":
					return printObjects(s.Out, output, jobs)
				}
				return fmt.Errorf("-o %s: kubectl kiln get prints json, yaml, wide or name", output)
			}
			if output != "" && output != "wide" {
				return fmt.Errorf("-w prints the table: drop -o %s", output)
			}
			served, err := s.served(ks)
			if err != nil {
				return err
			}
			return s.watch(cmd.Context(), served, ns, t)
		},
	}
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "list the jobs of every namespace")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "keep the table current: redrawn in place on a terminal, changes as lines otherwise")
	cmd.Flags().StringVarP(&output, "output", "o", "", "json, yaml, wide or name")
	return cmd
}

// row is one line of the table.
type row struct {
	namespace, kind, name, state, ready, why string
	created                                  time.Time
}

// rows are the table of every job of the kinds ks in namespace ns ("": all), and the jobs.
func (s *session) rows(ctx context.Context, ks []kind, ns string) ([]row, []job, error) {
	var rows []row
	var jobs []job
	for _, k := range ks {
		list, err := s.dyn.Resource(k.gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("listing %s: %w", k.gvr.Resource, err)
		}
		if len(list.Items) == 0 {
			continue
		}
		pods, err := s.core.Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: k.podSelector("")})
		if err != nil {
			return nil, nil, fmt.Errorf("listing pods: %w", err)
		}
		// Where the spec does not say how many pods (an autoscaled InferenceService, a TrainJob
		// whose runtime sets it), the pods that exist are the total.
		ready, live := map[[2]string]int64{}, map[[2]string]int64{}
		for i := range pods.Items {
			p := &pods.Items[i]
			key := [2]string{p.Namespace, p.Labels[k.podLabel]}
			if podReady(p) {
				ready[key]++
			}
			if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				live[key]++
			}
		}
		for i := range list.Items {
			obj := &list.Items[i]
			sum := k.summarize(obj)
			key := [2]string{obj.GetNamespace(), obj.GetName()}
			total := k.desired(obj)
			if total == 0 {
				total = live[key]
			}
			rdy := fmt.Sprintf("%d/%d", ready[key], total)
			rows = append(rows, row{namespace: obj.GetNamespace(), kind: k.title(), name: obj.GetName(), state: sum.state,
				ready: rdy, why: oneLine(sum.why), created: obj.GetCreationTimestamp().Time})
			jobs = append(jobs, job{kind: k, obj: obj})
		}
	}
	return rows, jobs, nil
}

// podReady: the pod runs, is not going, and its Ready condition is true.
func podReady(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && stuck.Ready(p)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// table prints rows as kubectl does.
type table struct {
	wide, allNamespaces bool
}

// whyWidth is where the narrow table cuts the WHY column (-o wide prints it whole).
const whyWidth = 90

func (t table) line(r row, now time.Time) string {
	why := r.why
	if !t.wide && len(why) > whyWidth {
		why = why[:whyWidth-3] + "..."
	}
	cells := []string{r.kind, r.name, r.state, r.ready, duration.HumanDuration(now.Sub(r.created)), why}
	if t.allNamespaces {
		cells = append([]string{r.namespace}, cells...)
	}
	return strings.Join(cells, "\t")
}

func (t table) print(out io.Writer, rows []row) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(out, "No kiln jobs or InferenceServices found.")
		return err
	}
	return t.lines(out, rows, true)
}

// lines prints rows, under the header if asked.
func (t table) lines(out io.Writer, rows []row, header bool) error {
	w := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	if header {
		h := "KIND\tNAME\tSTATE\tREADY\tAGE\tWHY"
		if t.allNamespaces {
			h = "NAMESPACE\t" + h
		}
		fmt.Fprintln(w, h)
	}
	now := time.Now()
	for _, r := range rows {
		fmt.Fprintln(w, t.line(r, now))
	}
	return w.Flush()
}

// watch keeps the table current until ctx ends: on a terminal, redrawn in place; piped, each
// row that changed as a line.
func (s *session) watch(ctx context.Context, ks []kind, ns string, t table) error {
	tty := isTerminal(s.Out)
	seen := map[string]string{}
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for first := true; ; first = false {
		rows, _, err := s.rows(ctx, ks, ns)
		if ctx.Err() != nil {
			return nil // Ctrl-C
		}
		if err != nil {
			return err
		}
		if tty {
			fmt.Fprint(s.Out, "\x1b[H\x1b[2J") // home, clear: the table is drawn again in place
			if err := t.print(s.Out, rows); err != nil {
				return err
			}
		} else {
			var changed []row
			now := map[string]string{}
			for _, r := range rows {
				key := r.namespace + "/" + r.kind + "/" + r.name
				now[key] = r.state + "\x00" + r.ready + "\x00" + r.why
				if seen[key] != now[key] {
					changed = append(changed, r)
				}
			}
			for key := range seen { // gone since the last read
				if _, ok := now[key]; !ok {
					ns, rest, _ := strings.Cut(key, "/")
					kind, name, _ := strings.Cut(rest, "/")
					changed = append(changed, row{namespace: ns, kind: kind, name: name, state: "Deleted", ready: "-"})
				}
			}
			seen = now
			var err error
			switch {
			case first:
				err = t.print(s.Out, changed)
			case len(changed) > 0:
				err = t.lines(s.Out, changed, false)
			}
			if err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// printObjects prints jobs as a List in json or yaml.
func printObjects(out io.Writer, format string, jobs []job) error {
	list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List"}}
	for _, j := range jobs {
		list.Items = append(list.Items, *j.obj)
	}
	return printObject(out, format, list)
}

// printObject prints obj in json (indented, as kubectl) or yaml.
func printObject(out io.Writer, format string, obj any) error {
	b, err := json.MarshalIndent(obj, "", "    ")
	if err != nil {
		return err
	}
	if format == "yaml" {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
	} else {
		b = append(b, '\n')
	}
	_, err = out.Write(b)
	return err
}
