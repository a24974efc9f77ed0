// Command kiln runs kiln's controller manager: `kiln manager [flags]`.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/burst"
	"github.com/kiln-ml/kiln/internal/cli"
	"github.com/kiln-ml/kiln/internal/controller/inferenceservice"
	"github.com/kiln-ml/kiln/internal/logging"
	"github.com/kiln-ml/kiln/internal/manager"
	"github.com/kiln-ml/kiln/internal/netpol"
	"github.com/kiln-ml/kiln/internal/replicajob"
	"github.com/kiln-ml/kiln/internal/tracing"
	"github.com/kiln-ml/kiln/internal/version"
)

const usage = `kiln runs machine-learning workloads on Kubernetes. (Models are fetched for
InferenceServices by kiln-fetch, a binary of its own in the same image.)

Usage:
  kiln manager [flags]   run the controller manager (kiln manager -h lists the flags)
  kiln dev [flags]       a local cluster with kiln and the sample jobs (what make run does)
  kiln wait-for HOST...  wait until HOST resolves (PyTorch workers' init container)
  kiln migrate-storage [CRD...]
                         rewrite objects stored at an older API version to the storage version
                         (docs/install.md, Upgrade)
  kiln version           the version, commit, Go and Kubernetes libraries of this build
  kiln install-kubectl DEST
                         copy kiln to DEST, where, named kubectl, it serves kubectl exec
                         (the init container of MPIJob launchers in kubectl-exec mode)

What kubectl kiln does (kiln COMMAND -h for each; docs/cli.md):
  kiln get [KIND|all]    every job and InferenceService in one table, and why each waits
  kiln describe JOB      its status, why it waits, its replicas' pods and its events
  kiln logs JOB          every replica's log, prefixed with the replica, -f follows restarts
  kiln run SCRIPT.py     a PyJob from a local script; --follow ends with its result
  kiln wait JOB          until it succeeded, runs or is ready (--for)
  kiln suspend|resume|delete JOB
`

// commands are kiln's subcommands.
var commands = map[string]func(args []string) error{
	"manager":         runManager,
	"dev":             runDev,
	"wait-for":        runWaitFor,
	"migrate-storage": runMigrateStorage,
	"install-kubectl": runInstallKubectl,
	"version": func([]string) error {
		fmt.Print(version.String())
		return nil
	},
}

// runUserCommand runs one of kubectl kiln's commands as kiln's, and says its exit code.
func runUserCommand(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := cli.New("kiln", cli.Streams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	root.SetArgs(args)
	return cli.Report(os.Stderr, root.ExecuteContext(ctx))
}

func main() {
	if filepath.Base(os.Args[0]) == "kubectl" {
		if err := runKubectl(os.Args[1:]); err != nil {
			fmt.Fprintf(os.Stderr, "%v\n", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		fmt.Print(usage)
		return
	}
	run, ok := commands[os.Args[1]]
	if !ok && cli.Serves(os.Args[1]) {
		os.Exit(runUserCommand(os.Args[1:]))
	}
	if !ok {
		fmt.Fprintf(os.Stderr, "kiln: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err := run(os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "kiln %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func runManager(args []string) error {
	builtIn, err := manager.Frameworks(manager.Options{})
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("kiln manager", flag.ContinueOnError)
	var o manager.Options
	var kinds, namespaces, cleanPodPolicy, kubeconfig string
	var qps float64
	var apiBurst int
	var refuseBorrowed bool
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file; default in-cluster config, then $KUBECONFIG, then ~/.kube/config")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus /metrics endpoint; 0 turns it off")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	fs.StringVar(&o.PprofAddr, "pprof-bind-address", "", "address of net/http/pprof (/debug/pprof/), whose heap profile needs allocations sampled (about 1 MiB); empty or 0: off, and none sampled")
	fs.BoolVar(&o.LeaderElection, "leader-elect", false, "elect a leader through a Lease so only one replica reconciles")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", "kiln.kiln.dev", "name of the leader-election Lease")
	fs.StringVar(&o.LeaderElectionNS, "leader-election-namespace", "", "namespace of the Lease; default the manager's own")
	fs.StringVar(&namespaces, "namespaces", os.Getenv("KUBEFLOW_NAMESPACE"), "comma-separated namespaces to watch; empty: all")
	fs.StringVar(&kinds, "kinds", "", "comma-separated job kinds to serve, of "+strings.Join(manager.KindNames(builtIn), ", ")+"; empty: all but kserve-inferenceservice (KServe's API: --kserve)")
	fs.StringVar(&o.Serving.KServeIngressDomain, "kserve-ingress-domain", "", "expose each KServe InferenceService outside the cluster through an Ingress for <name>-<namespace>.<domain> (and <name>-predictor-<namespace>.<domain>), as KServe's ingressDomain; empty: none (its url is its in-cluster address)")
	fs.StringVar(&o.Serving.KServeIngressClass, "kserve-ingress-class", "", "ingressClassName of those Ingresses; empty: the cluster's default IngressClass")
	fs.BoolVar(&o.KServe, "kserve", false, "serve KServe's serving.kserve.io InferenceService too, beside the kinds --kinds names (or all of them); its CRDs must be installed (the install's kserve component, the chart's kserve.enabled: docs/kserve.md)")
	fs.IntVar(&o.Workers, "workers", 16, "reconcile workers per kind (docs/performance.md: While kiln works, 16 workers per kind)")
	fs.IntVar(&o.Engine.Parallelism, "write-parallelism", 32, "pod and service writes one reconcile has in flight")
	fs.DurationVar(&o.Engine.ChildEventBatch, "child-event-batch", replicajob.DefaultChildEventBatch, "a job is planned again this long after the first event of its pods and services, with every such event seen by then (pods starting together make one reconcile); 0: at every event")
	burstHold := fs.Duration("burst-hold", burst.DefaultMaxHold, "once jobs arrive in a namespace at 5 or more a second (a script or pipeline submitting a batch), new jobs' pods and first status wait until none arrived there for a second, this long at most; 0: never (docs/decisions.md #20)")
	fs.DurationVar(&o.Engine.StatusInterval, "status-interval", time.Second, "a job's status is written at most this often, except when it finishes (pods starting one by one make one write); 0: every change")
	fs.StringVar(&cleanPodPolicy, "default-clean-pod-policy", string(kubeflowv1.CleanPodPolicyRunning), "runPolicy.cleanPodPolicy of jobs that set none: All, Running or None")
	fs.StringVar(&o.Engine.DefaultNetworkPolicy, "default-network-policy", netpol.None, "network policy of training jobs and PyJobs that set no kiln.dev/network-policy annotation: isolated (a NetworkPolicy lets their pods reach each other and DNS only) or none")
	fs.Float64Var(&qps, "kube-api-qps", -1, "client-side request rate limit; negative: none (the apiserver's priority and fairness protects it)")
	fs.IntVar(&apiBurst, "kube-api-burst", 0, "client-side burst, with --kube-api-qps")
	fs.StringVar(&o.ClusterDomain, "cluster-domain", os.Getenv("CUSTOM_CLUSTER_DOMAIN"), "domain appended to TF_CONFIG hosts, e.g. cluster.local")
	fs.StringVar(&o.GangSchedulerName, "gang-scheduler-name", "", "gang scheduling of jobs with more than one pod: empty uses the cluster's own PodGroups (scheduling.k8s.io/v1beta1) where it serves them; none, native, volcano, scheduler-plugins, or the name of a scheduler running scheduler-plugins' coscheduling (as Kubeflow's flag)")
	fs.StringVar(&o.MPIRemoteStart, "mpi-remote-start", kubeflowv1.MPIRemoteStartSSH, "how MPIJob launchers start ranks on workers when the job does not say (annotation kiln.dev/mpi-remote-start): ssh, or kubectl-exec, which also lets jobs choose it and needs kiln to hold pods/exec (kustomize component mpi-kubectl-exec, Helm value mpi.kubectlExec)")
	fs.StringVar(&o.PyTorchInitImage, "pytorch-init-container-image", version.Image(), "image of the PyTorch workers' init container, which runs `kiln wait-for` on the master (kiln's image; default this build's version)")
	fs.StringVar(&o.Serving.FetchImage, "model-fetch-image", version.Image(), "image whose /kiln-fetch downloads http(s)/s3/gs models before an InferenceService's server starts (kiln's image; default this build's version)")
	fs.StringVar(&o.Serving.KEDAHTTPScaler, "keda-http-scaler", inferenceservice.DefaultKEDAHTTPScaler, "the KEDA HTTP add-on's external scaler (host:port), named by the ScaledObjects of InferenceServices that scale to zero")
	fs.StringVar(&o.Serving.KEDAHTTPInterceptor, "keda-http-interceptor", inferenceservice.DefaultKEDAHTTPInterceptor, "the KEDA HTTP add-on's interceptor proxy Service (<name>.<namespace>:<port>), which holds requests while an InferenceService scaled to zero starts")
	fs.BoolVar(&o.EnableHTTP2, "enable-http2", false, "let the webhook and metrics servers speak HTTP/2 (off: HTTP/1.1 only)")
	fs.BoolVar(&o.SecureMetrics, "metrics-secure", false, "serve /metrics over HTTPS to callers whose token may get the /metrics URL (TokenReview and SubjectAccessReview)")
	fs.IntVar(&o.Webhook.Port, "webhook-port", 9443, "port of the admission webhook server; 0 serves no webhooks")
	fs.BoolVar(&refuseBorrowed, "refuse-borrowed-rights", true, "refuse, to a requester who may not create pods in the namespace (a SubjectAccessReview), a job or InferenceService whose pods would run as another ServiceAccount, read Secrets, use the node's namespaces or paths, or run privileged: kiln creates the pods with its own rights")
	fs.StringVar(&o.Webhook.CertDir, "webhook-cert-dir", "", "folder with tls.crt and tls.key kept by someone else (cert-manager); empty: kiln keeps its own certificate in --webhook-secret")
	fs.StringVar(&o.Webhook.Namespace, "webhook-namespace", envOr("POD_NAMESPACE", "kiln-system"), "namespace of the webhook Service and certificate Secret")
	fs.StringVar(&o.Webhook.SecretName, "webhook-secret", "kiln-webhook-cert", "Secret that holds kiln's webhook CA and serving certificate")
	webhookService := fs.String("webhook-service", "kiln-webhook", "Service the apiserver reaches the webhooks through; its DNS names go into the certificate")
	webhookHosts := fs.String("webhook-hosts", "", "comma-separated extra host names or IP addresses for the webhook certificate")
	otlp := fs.String("otlp-endpoint", "", "OTLP/HTTP receiver to send traces to: host:port (HTTPS; plain HTTP with OTEL_EXPORTER_OTLP_INSECURE=true) or an http(s) URL, usually port 4318, /v1/traces appended; default the OTEL_EXPORTER_OTLP_* variables, or no tracing")
	var logs logging.Options
	logs.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.Webhook.AllowBorrowedRights = !refuseBorrowed
	o.Engine.Burst = burst.New(*burstHold, clock.RealClock{})
	ctrl.SetLogger(logs.New(nil))
	tuneRuntime(os.Getenv, servesProfiles(o.PprofAddr))

	switch p := kubeflowv1.CleanPodPolicy(cleanPodPolicy); p {
	case kubeflowv1.CleanPodPolicyAll, kubeflowv1.CleanPodPolicyRunning, kubeflowv1.CleanPodPolicyNone:
		o.Engine.DefaultCleanPodPolicy = p
	default:
		return fmt.Errorf("--default-clean-pod-policy: %q is not one of All, Running, None", cleanPodPolicy)
	}
	if p := o.Engine.DefaultNetworkPolicy; p != netpol.Isolated && p != netpol.None {
		return fmt.Errorf("--default-network-policy: %q is not one of isolated, none", p)
	}
	o.Webhook.DNSNames, o.Webhook.IPAddresses = webhookNames(*webhookService, o.Webhook.Namespace, splitList(*webhookHosts))
	o.Kinds = splitList(kinds)
	o.Namespaces = splitList(namespaces)

	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = float32(qps), apiBurst
	ctx := ctrl.SetupSignalHandler()
	traceLog := ctrl.Log.WithName("tracing")
	shutdown, err := tracing.Setup(*otlp, traceLog)
	if err != nil {
		return fmt.Errorf("tracing: %w", err) // the error names the flag or variable
	}
	defer func() {
		// Within the pod's grace period (30 s), which the manager's own stop shares.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			traceLog.Error(err, "stopping the trace exporter: spans not yet sent are lost")
		}
	}()
	mgr, err := manager.New(cfg, o)
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// tuneRuntime sets the manager's Go runtime (docs/performance.md, Go runtime settings), leaving
// what the environment (getenv) sets. profiled: it serves net/http/pprof.
func tuneRuntime(getenv func(string) string, profiled bool) {
	if getenv("GOGC") == "" {
		// Half the default heap headroom: a controller's live heap is mostly its cache, and the
		// extra GC work is cheap next to a smaller footprint.
		debug.SetGCPercent(50)
	}
	if getenv("GOMAXPROCS") == "" {
		// One processor: kiln's work is a stream of small steps (decode an event, plan a job, send
		// a request), a small part of a core on average. With more, the Go scheduler's wake-ups
		// and spinning threads cost more CPU than the parallelism gives, for some latency in a
		// burst.
		runtime.GOMAXPROCS(1)
	}
	if !profiled && !strings.Contains(getenv("GODEBUG"), "memprofilerate=") {
		// No heap profile is served, so no later allocation is sampled for one: the samples'
		// stacks and their table cost about 1 MiB of heap and file (the linker turns sampling
		// off in programs that never read a profile; kiln links net/http/pprof for
		// --pprof-bind-address).
		runtime.MemProfileRate = 0
	}
}

// servesProfiles says whether --pprof-bind-address addr serves net/http/pprof: "" and "0" do
// not, as controller-runtime reads them.
func servesProfiles(addr string) bool { return addr != "" && addr != "0" }

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		os.Setenv("KUBECONFIG", kubeconfig)
	}
	cfg, err := config.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("finding the cluster: %w (pass --kubeconfig or set KUBECONFIG)", err)
	}
	return cfg, nil
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// webhookNames are the certificate's names: the Service's in-cluster DNS names and extra hosts,
// those that parse as IP addresses separately.
func webhookNames(service, namespace string, hosts []string) ([]string, []net.IP) {
	dns := []string{service + "." + namespace + ".svc", service + "." + namespace + ".svc.cluster.local", service, service + "." + namespace}
	var ips []net.IP
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else {
			dns = append(dns, h)
		}
	}
	return dns, ips
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
