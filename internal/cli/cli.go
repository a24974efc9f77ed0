// Package cli is kiln's command line for users, `kubectl kiln`: every kind in one table, why a
// job waits, logs across replicas, and a PyJob from a local script.
package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kiln-ml/kiln/internal/version"
)

// New is the command named use ("kubectl kiln", or "kiln"), reading and writing streams.
//
// Its connection flags are kubectl's (--kubeconfig, --context, -n, --as, ...), bound by
// client-go's clientcmd as k8s.io/cli-runtime binds them. cli-runtime itself is not linked: it
// brings kustomize, and 33 MiB more resident memory at start to kiln's manager, which serves
// these commands too (docs/decisions.md, 18).
func New(use string, streams Streams) *cobra.Command {
	s := &session{Streams: streams, rules: clientcmd.NewDefaultClientConfigLoadingRules()}
	root := &cobra.Command{
		Use:   "kiln",
		Short: "kiln's jobs and InferenceServices: see them, learn why they wait, follow their logs, run a script",
		Long: `kiln's jobs and InferenceServices: see them, learn why they wait, follow their logs, run a script.

A JOB is a name, or KIND/NAME where two kinds share the name (pytorchjob/mnist, isvc/iris).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: use},
	}
	flags := root.PersistentFlags()
	flags.StringVar(&s.rules.ExplicitPath, clientcmd.RecommendedConfigPathFlag, "", "path to the kubeconfig file")
	clientcmd.BindOverrideFlags(&s.overrides, flags, clientcmd.RecommendedConfigOverrideFlags(""))
	root.AddCommand(s.getCommand(), s.describeCommand(), s.logsCommand(), s.waitCommand(),
		s.suspendCommand(true), s.suspendCommand(false), s.deleteCommand(), s.runCommand(),
		&cobra.Command{Use: "version", Short: "The version and commit of this build", Args: cobra.NoArgs,
			Run: func(cmd *cobra.Command, _ []string) { fmt.Fprint(s.Out, version.String()) }})
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	return root
}

// Serves says whether name is one of the commands New makes.
func Serves(name string) bool {
	c, _, err := New("kiln", Streams{}).Find([]string{name})
	return err == nil && c.Name() == name
}

// Streams are where a command reads and writes.
type Streams struct {
	In          io.Reader
	Out, ErrOut io.Writer
}

// session is one command's connection to the cluster, made on first use.
type session struct {
	Streams
	rules     *clientcmd.ClientConfigLoadingRules
	overrides clientcmd.ConfigOverrides
	config    clientcmd.ClientConfig
	dyn       dynamic.Interface
	core      corev1client.CoreV1Interface
	disc      discovery.DiscoveryInterface
	servedGV  map[schema.GroupVersion]map[string]bool
}

func (s *session) clientConfig() clientcmd.ClientConfig {
	if s.config == nil {
		s.config = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(s.rules, &s.overrides)
	}
	return s.config
}

func (s *session) connect() error {
	if s.dyn != nil {
		return nil
	}
	cfg, err := s.clientConfig().ClientConfig()
	if err != nil {
		return fmt.Errorf("reading the kubeconfig: %w", err)
	}
	if s.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return err
	}
	if s.core, err = corev1client.NewForConfig(cfg); err != nil {
		return err
	}
	s.disc, err = discovery.NewDiscoveryClientForConfig(cfg)
	return err
}

// namespace is -n's namespace, else the kubeconfig context's.
func (s *session) namespace() string {
	ns, _, err := s.clientConfig().Namespace()
	if err != nil || ns == "" {
		return "default"
	}
	return ns
}

// served are the kinds among ks the cluster serves (a TrainJob only where Trainer's API is
// installed, KServe's only where it is). An API group the cluster does not serve is left out;
// any other error (no connection, no rights, an expired token) is returned.
func (s *session) served(ks []kind) ([]kind, error) {
	if s.servedGV == nil {
		s.servedGV = map[schema.GroupVersion]map[string]bool{}
	}
	var out []kind
	for _, k := range ks {
		gv := k.gvr.GroupVersion()
		resources, ok := s.servedGV[gv]
		if !ok {
			resources = map[string]bool{}
			list, err := s.disc.ServerResourcesForGroupVersion(gv.String())
			if err != nil && !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("asking the cluster which of kiln's APIs it serves: %w", err)
			}
			if list != nil {
				for _, r := range list.APIResources {
					resources[r.Name] = true
				}
			}
			s.servedGV[gv] = resources
		}
		if resources[k.gvr.Resource] {
			out = append(out, k)
		}
	}
	return out, nil
}

// job is one object of a kiln kind.
type job struct {
	kind kind
	obj  *unstructured.Unstructured
}

func (j job) name() string { return j.obj.GetName() }

// ref is how the command line names j: kind/name.
func (j job) ref() string { return strings.ToLower(j.kind.name) + "/" + j.name() }

// find reads the job a user named: NAME (whichever served kind has it) or KIND/NAME.
func (s *session) find(ctx context.Context, typed string) (job, error) {
	if err := s.connect(); err != nil {
		return job{}, err
	}
	candidates, name := kinds, typed
	if k, n, ok := strings.Cut(typed, "/"); ok {
		var err error
		if candidates, err = kindsNamed(k); err != nil {
			return job{}, err
		}
		name = n
	}
	ns := s.namespace()
	var found []job
	served, err := s.served(candidates)
	if err != nil {
		return job{}, err
	}
	for _, k := range served {
		obj, err := s.dyn.Resource(k.gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil:
			found = append(found, job{kind: k, obj: obj})
		case !apierrors.IsNotFound(err):
			return job{}, fmt.Errorf("reading %s %s: %w", k.name, name, err)
		}
	}
	switch len(found) {
	case 0:
		return job{}, fmt.Errorf("no job or InferenceService named %q in namespace %s (kubectl kiln get -n %s lists them)", name, ns, ns)
	case 1:
		return found[0], nil
	}
	var refs []string
	for _, j := range found {
		refs = append(refs, strings.ToLower(j.kind.title())+"/"+name)
	}
	return job{}, fmt.Errorf("%q names %d objects in namespace %s: say which, %s", name, len(found), ns, strings.Join(refs, " or "))
}

// onJob makes cmd take one JOB argument (completed from the namespace's jobs), find that job, and
// run run on it.
func (s *session) onJob(cmd *cobra.Command, run func(ctx context.Context, j job) error) *cobra.Command {
	cmd.Args, cmd.ValidArgsFunction = cobra.ExactArgs(1), s.completeJobs
	cmd.RunE = func(c *cobra.Command, args []string) error {
		j, err := s.find(c.Context(), args[0])
		if err != nil {
			return err
		}
		return run(c.Context(), j)
	}
	return cmd
}

// completeJobs completes a JOB argument: the jobs of the namespace, by name, or KIND/NAME where
// two kinds share the name.
func (s *session) completeJobs(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 || s.connect() != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	served, err := s.served(kinds)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	_, jobs, err := s.rows(ctx, served, s.namespace())
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	count := map[string]int{}
	for _, j := range jobs {
		count[j.name()]++
	}
	var out []cobra.Completion
	for _, j := range jobs {
		if count[j.name()] > 1 {
			out = append(out, strings.ToLower(j.kind.title())+"/"+j.name())
		} else {
			out = append(out, j.name())
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// pods are j's pods, oldest first.
func (s *session) pods(ctx context.Context, j job) ([]corev1.Pod, error) {
	list, err := s.core.Pods(j.obj.GetNamespace()).List(ctx, metav1.ListOptions{LabelSelector: j.kind.podSelector(j.name())})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(list.Items, func(a, b corev1.Pod) int {
		return strings.Compare(j.kind.replicaName(&a), j.kind.replicaName(&b))
	})
	return list.Items, nil
}
