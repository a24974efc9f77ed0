// Command bench measures kiln against the apiserver's own limit (`make bench`).
//
// Each run starts a fresh local cluster (kwokctl binary runtime, QPS limits off, fake nodes),
// optionally fills it with pods kiln does not own, and then either
//
//   - floor: a plain client creates exactly the pods and services kiln would create for the
//     workload, as fast as the apiserver accepts them, with no controller at all; or
//   - same: the same-work floor: the client creates each job and then, at once, exactly the pods
//     and services kiln would create for it (owned by it), with no controller; compare it with a
//     kiln run under the same admission (WEBHOOKS=0: kiln without its webhooks); or
//   - kiln: the kiln manager runs as a separate process, as users run it (webhooks included),
//     and the benchmark creates the jobs.
//
// Both are timed the same way, from a watch on the pods: until every pod exists, until every
// job's pods all run, until every job succeeded. The report (JSON, Markdown, SVG) goes under
// -out; the Markdown table is printed.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kiln-ml/kiln/test/testenv"
)

// Params describe one benchmark.
type Params struct {
	Jobs         int           `json:"jobs"`
	Workers      int           `json:"workersPerJob"`
	Duration     time.Duration `json:"podDuration"`
	PyTorchShare float64       `json:"pytorchShare"`
	Foreign      int           `json:"foreignPods"`
	Parallelism  int           `json:"clientParallelism"`
	// Submit is how the jobs are submitted: "parallel" (Parallelism in flight) or "serial" (one
	// create at a time, as a user's client or a pipeline does).
	Submit string `json:"submit"`
	// Identity is who kiln's manager runs as: its install's ServiceAccount, or the admin.
	Identity string `json:"identity"`
	// PriorityAndFairness: the apiserver runs API Priority and Fairness with its default
	// concurrency, as a cluster's does (kwokctl turns it off).
	PriorityAndFairness bool `json:"priorityAndFairness"`
	// KilnShares, above 0, puts kiln's ServiceAccount in a priority level of its own with that
	// many nominal concurrency shares.
	KilnShares int `json:"kilnShares,omitempty"`
	// Nodes is the number of fake nodes (0: one per podsPerNode pods, plus two).
	Nodes int `json:"nodes"`
	// Webhooks: kiln runs with its admission webhooks (the same-work floor has none).
	Webhooks bool `json:"webhooks"`
	// ManagerEnv is environment added to the manager's ("GOGC=100 GOMAXPROCS=2").
	ManagerEnv string `json:"managerEnv,omitempty"`
	// ManagerArgs are flags added to the manager's ("--workers 2 --write-parallelism 4").
	ManagerArgs string `json:"managerArgs,omitempty"`
	Rounds      int    `json:"rounds"`
	// Profile, above 0, serves the manager's net/http/pprof, takes a CPU profile of it for this
	// long from the first job created and a heap profile at the end (after the CPU profile: one
	// longer than the run covers all of it, the manager then idle); without, the manager
	// serves none, as users run it (and samples no allocations). Every run, the floors' too,
	// then also saves a CPU profile of the apiserver over the same time (<mode>-apiserver.pprof).
	Profile time.Duration `json:"profile,omitempty"`
	Trace   string        `json:"-"`
}

func main() {
	var p Params
	var out, tools, modes string
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	fs.IntVar(&p.Jobs, "jobs", envInt("J", 200), "number of jobs (J)")
	fs.IntVar(&p.Workers, "workers", envInt("W", 4), "workers per job, besides one PS or Master (W)")
	fs.DurationVar(&p.Duration, "duration", envDuration("D", 30*time.Second), "how long each pod runs before it succeeds (D)")
	fs.Float64Var(&p.PyTorchShare, "pytorch", envFloat("PYTORCH", 0), "share of the jobs that are PyTorchJobs (Master + W Workers), 0..1")
	fs.IntVar(&p.Foreign, "foreign", envInt("FOREIGN", 0), "pods kiln does not own created before the run")
	fs.IntVar(&p.Parallelism, "parallelism", envInt("PARALLELISM", 64), "requests the benchmark's own client has in flight")
	fs.StringVar(&p.Submit, "submit", envStr("SUBMIT", "parallel"), "how the jobs are submitted: parallel (PARALLELISM in flight) or serial (one create at a time, as a user's client does); with serial, the same-work floor submits every job, then creates their pods and services (SUBMIT)")
	fs.BoolVar(&p.PriorityAndFairness, "apf", envInt("APF", 1) != 0, "the apiserver serves under API Priority and Fairness with its default concurrency, as a cluster's does; APF=0 for none and no limit, as kwokctl leaves it (APF)")
	fs.IntVar(&p.KilnShares, "kiln-shares", envInt("KILN_SHARES", 0), "with IDENTITY=serviceaccount and APF, kiln's requests go to a priority level of their own with this many nominal concurrency shares (global-default has 20, workload-low 100); 0: the service-accounts flow schema's, workload-low (KILN_SHARES)")
	fs.StringVar(&p.Identity, "identity", envStr("IDENTITY", identityServiceAccount), "who kiln's manager runs as in the TFJob runs: serviceaccount (its install's, with the install's RBAC) or admin (IDENTITY)")
	fs.IntVar(&p.Nodes, "nodes", envInt("NODES", 0), "fake nodes of the cluster; 0: one per 64 pods, plus two (NODES)")
	fs.BoolVar(&p.Webhooks, "webhooks", envInt("WEBHOOKS", 1) != 0, "run kiln with its admission webhooks; WEBHOOKS=0 for the same admission as the same-work floor's (none)")
	fs.StringVar(&p.ManagerEnv, "manager-env", os.Getenv("MANAGER_ENV"), "environment variables added to kiln manager's, space-separated: MANAGER_ENV='GOGC=100 GOMAXPROCS=2'")
	fs.StringVar(&p.ManagerArgs, "manager-args", os.Getenv("MANAGER_ARGS"), "flags added to kiln manager's, space-separated: MANAGER_ARGS='--workers 2 --write-parallelism 4'")
	fs.StringVar(&p.Trace, "trace", os.Getenv("TRACE"), "print every status change kiln writes to the job of this name, e.g. job-00150")
	fs.IntVar(&p.Rounds, "rounds", envInt("ROUNDS", 1), "times to make every run, alternating the modes; the table shows each mode's median run (ROUNDS)")
	fs.StringVar(&modes, "modes", envStr("MODES", "floor,kiln"), "runs to make, in order: floor (pods and services by a client), same (the same work: jobs, then their pods and services, by a client), kiln; or TrainJobs of numNodes W on torch-distributed: trainjob (kiln + JobSet), trainer (Kubeflow Trainer's controller + JobSet); or J InferenceServices of KServe's API: isvc (kiln), kserve (KServe's controller), and after isvc isvcfloor (the Deployments and Services kiln made, by a client) or isvcsame (each just after its InferenceService, which no controller serves)")
	fs.DurationVar(&p.Profile, "profile", envDuration("PROFILE", 0), "take a CPU profile of the manager and of the apiserver for this long from the first job created, and a heap profile of the manager at the end; only then does the manager serve net/http/pprof and sample its allocations (PROFILE)")
	fs.StringVar(&out, "out", envStr("OUT", "bench/results"), "results folder")
	fs.StringVar(&tools, "tools", os.Getenv("KILN_TOOLS_DIR"), "folder of the binaries hack/tools.sh built")
	_ = fs.Parse(os.Args[1:])
	if p.Submit != "parallel" && p.Submit != "serial" {
		fail(fmt.Errorf("-submit %q: use parallel or serial", p.Submit))
	}
	if p.Rounds < 1 {
		fail(fmt.Errorf("-rounds must be at least 1, not %d", p.Rounds))
	}
	if tools == "" {
		fail(fmt.Errorf("-tools (or KILN_TOOLS_DIR) must name the folder hack/tools.sh prints: run `make bench`"))
	}

	ctrl.SetLogger(testenv.Logger()) // errors only
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir := filepath.Join(out, time.Now().UTC().Format("20060102-150405")+fmt.Sprintf("-J%d-W%d", p.Jobs, p.Workers))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fail(err)
	}
	r := &Report{Params: p, Machine: machine()}
	for round := 1; round <= p.Rounds; round++ {
		logs := dir // the clusters' and the manager's logs, and profiles
		if p.Rounds > 1 {
			logs = filepath.Join(dir, fmt.Sprintf("round-%d", round))
			if err := os.MkdirAll(logs, 0o755); err != nil {
				fail(err)
			}
		}
		for _, mode := range splitModes(modes) {
			fmt.Printf("== %s run %d/%d: J=%d W=%d D=%s foreign=%d\n", mode, round, p.Rounds, p.Jobs, p.Workers, p.Duration, p.Foreign)
			run := run
			switch {
			case isTrainJobMode(mode):
				run = runTrainJobs
			case isServingMode(mode):
				run = runServing
			}
			res, err := run(ctx, mode, p, tools, logs)
			if err != nil {
				fail(fmt.Errorf("%s run %d: %w", mode, round, err))
			}
			res.Round = round
			r.Runs = append(r.Runs, res)
		}
	}
	if err := r.write(dir); err != nil {
		fail(err)
	}
	fmt.Println()
	fmt.Print(r.markdown())
	fmt.Printf("\nresults: %s\n", dir)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

func envStr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil {
		return v
	}
	return def
}

func envFloat(key string, def float64) float64 {
	if v, err := strconv.ParseFloat(os.Getenv(key), 64); err == nil {
		return v
	}
	return def
}

func envDuration(key string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(key)); err == nil {
		return v
	}
	return def
}
