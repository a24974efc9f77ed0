// Package mpi is the MPIJob framework: a launcher pod that runs mpirun and decides the job's
// outcome, worker pods it starts the ranks on, the hostfile ConfigMap <name>-config, and the
// remote start of the ranks: SSH with a per-job key pair (the default, which needs no rights on
// pods/exec) or, opted into, Kubeflow v1's `kubectl exec`.
package mpi

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/version"
)

// What the engine does with MPIJobs: read and watch them, delete them (TTL), write their status.
// +kubebuilder:rbac:groups=kubeflow.org,resources=mpijobs,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=kubeflow.org,resources=mpijobs/status,verbs=get;patch
// +kubebuilder:rbac:groups=kubeflow.org,resources=mpijobs/finalizers,verbs=update
// The hostfile ConfigMap (an extra: read before it is written, watched so that a deleted one comes
// back), and the SSH Secret, only ever created (kiln holds no right to read key material back).
// The kubectl-exec mode's ServiceAccount, Role and RoleBinding are granted by its install component
// (config/components/mpi-kubectl-exec), not here: SSH needs none of it.
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=create
// The launcher of a job written at v2beta1 is a batch Job, as mpi-operator's: made, watched, and
// deleted where its pod would be (suspended, cleaned up).
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete

const (
	launcher = kubeflowv1.MPIJobReplicaTypeLauncher
	worker   = kubeflowv1.MPIJobReplicaTypeWorker
)

// controllerName is the operator-name label of MPIJobs' pods and objects.
const controllerName = "mpijob-controller"

// Config holds the operator-level settings of the MPI framework.
type Config struct {
	// RemoteStart is the remote start of jobs that do not choose one (kubeflowv1.MPIRemoteStart*;
	// default ssh). kubectl-exec also allows jobs to choose it: kiln then holds pods/exec, which
	// it grants to those jobs' launchers.
	RemoteStart string
	// KubectlImage is the image of the launcher's kubectl-delivery init container in
	// kubectl-exec mode: kiln's own, which serves as kubectl exec (default version.Image()).
	KubectlImage string
}

// New returns the MPIJob framework.
func New(cfg Config) framework.Framework {
	if cfg.RemoteStart == "" {
		cfg.RemoteStart = kubeflowv1.MPIRemoteStartSSH
	}
	if cfg.KubectlImage == "" {
		cfg.KubectlImage = version.Image()
	}
	return framework.Framework{
		Kind:              kubeflowv1.MPIJobKind,
		Name:              "mpi",
		ControllerName:    controllerName,
		ReplicaSpecsField: "mpiReplicaSpecs",
		MaxReplicas:       5000,
		MaxReplicasWhy:    "the hostfile ConfigMap lists every worker and a ConfigMap holds at most 1 MiB",
		ReplicaTypes:      []kubeflowv1.ReplicaType{launcher, worker},
		// As Kubeflow: the first container runs MPI, whatever its name, and gets no port.
		DefaultRestartPolicy: kubeflowv1.RestartPolicyNever,
		NewJob:               func() framework.Job { return &kubeflowv1.MPIJob{} },
		NewJobList:           func() client.ObjectList { return &kubeflowv1.MPIJobList{} },
		Default:              func(job framework.Job) { setDefaults(mpiJob(job)) },
		Validate: func(job framework.Job, specs *field.Path) (field.ErrorList, []string) {
			return validate(cfg, mpiJob(job), specs)
		},
		PodName: func(job framework.Job, rtype kubeflowv1.ReplicaType, index int) string {
			return podName(job.GetName(), rtype, index)
		},
		// SSH reaches the launcher and workers by the names in the hostfile: each gets a
		// headless service of its name, or, written at v2beta1, one Service of the job's name
		// (an extra) makes each reachable as <pod>.<job>.<ns>.svc. kubectl exec names pods and
		// needs none.
		Services: func(job framework.Job) bool {
			j := mpiJob(job)
			return remoteStart(cfg, j) == kubeflowv1.MPIRemoteStartSSH && !jobService(j)
		},
		SetClusterSpec: func(job framework.Job, t *corev1.PodTemplateSpec, rtype kubeflowv1.ReplicaType, index int) error {
			j := mpiJob(job)
			setClusterSpec(cfg, j, t, rtype)
			if jobService(j) {
				t.Spec.Hostname, t.Spec.Subdomain = podName(j.Name, rtype, index), j.Name
			}
			return nil
		},
		IsMasterRole: func(_ framework.Job, rtype kubeflowv1.ReplicaType, _ int) bool { return rtype == launcher },
		// mpi-operator runs the launcher as a batch Job <job>-launcher, which retries it under
		// backoffLimit: so does kiln for a job written at its API.
		RunsAsJob: func(job framework.Job, rtype kubeflowv1.ReplicaType) bool {
			return rtype == launcher && job.GetAnnotations()[kubeflowv1.AnnotationAPIVersion] == kubeflowv1.APIVersionV2beta1
		},
		// WaitForWorkersReady: the launcher is created once every worker is ready.
		WaitsFor: func(job framework.Job, rtype kubeflowv1.ReplicaType) (kubeflowv1.ReplicaType, bool) {
			j := mpiJob(job)
			return worker, rtype == launcher && j.Annotations[kubeflowv1.AnnotationMPILauncherCreationPolicy] == kubeflowv1.LauncherCreationWaitForWorkersReady
		},
		Outcome: func(job framework.Job, replicas framework.Replicas) framework.Outcome {
			l := replicas[launcher]
			switch {
			case l.Replicas > 0 && l.Succeeded >= l.Replicas:
				return framework.Outcome{Succeeded: true, Message: fmt.Sprintf("MPIJob %s is successfully completed.", job.GetName())}
			case l.Active > 0:
				return framework.Outcome{Running: true, Message: fmt.Sprintf("MPIJob %s is running.", job.GetName())}
			}
			return framework.Outcome{}
		},
		// The launcher decides: a rank lost with its worker fails mpirun, and so the launcher.
		IgnoresFailures: func(_ framework.Job, rtype kubeflowv1.ReplicaType) bool { return rtype == worker },
		Extras: func(job framework.Job, s framework.State) []framework.Extra {
			return extras(cfg, mpiJob(job), s)
		},
		ExtraKinds: extraKinds(cfg),
		Secrets: func(job framework.Job) ([]*corev1.Secret, error) {
			j := mpiJob(job)
			if remoteStart(cfg, j) != kubeflowv1.MPIRemoteStartSSH {
				return nil, nil
			}
			s, err := sshAuthSecret(j)
			if err != nil {
				return nil, err
			}
			return []*corev1.Secret{s}, nil
		},
	}
}

func mpiJob(job framework.Job) *kubeflowv1.MPIJob { return job.(*kubeflowv1.MPIJob) }

// extraKinds are the kinds of the extras: the hostfile ConfigMap, and where jobs may choose
// kubectl-exec (its install component grants their watch) the launcher's ServiceAccount, Role
// and RoleBinding.
func extraKinds(cfg Config) []schema.GroupVersionKind {
	kinds := []schema.GroupVersionKind{corev1.SchemeGroupVersion.WithKind("ConfigMap")}
	if cfg.RemoteStart == kubeflowv1.MPIRemoteStartKubectlExec {
		kinds = append(kinds, corev1.SchemeGroupVersion.WithKind("ServiceAccount"),
			rbacv1.SchemeGroupVersion.WithKind("Role"), rbacv1.SchemeGroupVersion.WithKind("RoleBinding"))
	}
	return kinds
}

// podName is "<job>-launcher" for the launcher and "<job>-worker-<i>" for the workers, as
// Kubeflow names them.
func podName(job string, rtype kubeflowv1.ReplicaType, index int) string {
	if rtype == launcher {
		return job + "-launcher"
	}
	return framework.ReplicaName(job, rtype, index)
}

// remoteStart is the job's remote start: its annotation's, else SSH for a job written at
// v2beta1 (mpi-operator's API knows no other), else the operator's default.
func remoteStart(cfg Config, job *kubeflowv1.MPIJob) string {
	if v := job.Annotations[kubeflowv1.AnnotationMPIRemoteStart]; v != "" {
		return v
	}
	if job.Annotations[kubeflowv1.AnnotationAPIVersion] == kubeflowv1.APIVersionV2beta1 {
		return kubeflowv1.MPIRemoteStartSSH
	}
	return cfg.RemoteStart
}

// jobService says whether the job's pods are reached as mpi-operator reaches them, through one
// headless Service of the job's name, as <pod>.<job>.<ns>.svc: a job written at v2beta1 that
// starts its ranks over SSH (its remote start does not depend on the operator's default).
// Kubeflow v1's way is a Service per pod, of its name.
func jobService(job *kubeflowv1.MPIJob) bool {
	return job.Annotations[kubeflowv1.AnnotationAPIVersion] == kubeflowv1.APIVersionV2beta1 && remoteStart(Config{}, job) == kubeflowv1.MPIRemoteStartSSH
}

// implementation is the job's MPI (kubeflowv1.MPIImplementation*); "" when it names none, which
// is run as Open MPI with Intel MPI's variables set too (as kiln's v1 MPIJobs always were).
func implementation(job *kubeflowv1.MPIJob) string {
	return job.Annotations[kubeflowv1.AnnotationMPIImplementation]
}

// launcherRunsRanks says whether the hostfile lists the launcher: as the job says
// (runLauncherAsWorker), else when it asks for a GPU (Kubeflow v1's rule).
func launcherRunsRanks(job *kubeflowv1.MPIJob) bool {
	if v, ok := job.Annotations[kubeflowv1.AnnotationMPIRunLauncherAsWorker]; ok {
		return v == "true"
	}
	return isGPULauncher(job)
}

// setDefaults copies the deprecated top-level cleanPodPolicy into runPolicy when only it is set
// (when both are, runPolicy's wins, as in Kubeflow).
func setDefaults(job *kubeflowv1.MPIJob) {
	if job.Spec.CleanPodPolicy != nil && job.Spec.RunPolicy.CleanPodPolicy == nil {
		p := *job.Spec.CleanPodPolicy
		job.Spec.RunPolicy.CleanPodPolicy = &p
	}
}

// validate checks what Kubeflow's in-controller MPI validation checks beyond the engine's rules,
// and the remote start.
func validate(cfg Config, job *kubeflowv1.MPIJob, specs *field.Path) (field.ErrorList, []string) {
	var errs field.ErrorList
	var warnings []string
	l := job.Spec.MPIReplicaSpecs[launcher]
	switch {
	case l == nil:
		errs = append(errs, field.Required(specs.Key(string(launcher)), "an MPIJob needs a Launcher: it runs mpirun and decides the job's outcome"))
	case framework.NumReplicas(l) != 1:
		errs = append(errs, field.Invalid(specs.Key(string(launcher)).Child("replicas"), framework.NumReplicas(l), "must be 1: one launcher runs mpirun; add replicas to Worker instead"))
	}
	annotation := field.NewPath("metadata", "annotations").Key(kubeflowv1.AnnotationMPIRemoteStart)
	switch rs := remoteStart(cfg, job); rs {
	case kubeflowv1.MPIRemoteStartSSH:
	case kubeflowv1.MPIRemoteStartKubectlExec:
		if cfg.RemoteStart != kubeflowv1.MPIRemoteStartKubectlExec {
			errs = append(errs, field.Forbidden(annotation, "kubectl-exec is not enabled in this kiln install (it needs rights on pods/exec): "+
				"remove the annotation to use SSH, or have the install enable it (kustomize component config/components/mpi-kubectl-exec, Helm value mpi.kubectlExec=true)"))
		}
		if l != nil && l.Template.Spec.ServiceAccountName != "" && l.Template.Spec.ServiceAccountName != launcherAccount(job) {
			errs = append(errs, field.Forbidden(specs.Key(string(launcher)).Child("template", "spec", "serviceAccountName"), fmt.Sprintf(
				"in kubectl-exec mode the launcher runs as %s, the ServiceAccount kiln creates for this job, which alone may exec into its workers: remove serviceAccountName, or use SSH",
				launcherAccount(job))))
		}
	default:
		errs = append(errs, field.NotSupported(annotation, rs, []string{kubeflowv1.MPIRemoteStartSSH, kubeflowv1.MPIRemoteStartKubectlExec}))
	}
	annotations := field.NewPath("metadata", "annotations")
	for _, a := range []struct {
		key     string
		allowed []string
	}{
		{kubeflowv1.AnnotationMPIImplementation, []string{kubeflowv1.MPIImplementationOpenMPI, kubeflowv1.MPIImplementationIntel, kubeflowv1.MPIImplementationMPICH}},
		{kubeflowv1.AnnotationMPIRunLauncherAsWorker, []string{"true", "false"}},
		{kubeflowv1.AnnotationMPILauncherCreationPolicy, []string{kubeflowv1.LauncherCreationAtStartup, kubeflowv1.LauncherCreationWaitForWorkersReady}},
	} {
		if v, ok := job.Annotations[a.key]; ok && !slices.Contains(a.allowed, v) {
			errs = append(errs, field.NotSupported(annotations.Key(a.key), v, a.allowed))
		}
	}
	if p := job.Annotations[kubeflowv1.AnnotationMPISSHAuthMountPath]; p != "" && (p[0] != '/' || len(p) < 2) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "annotations").Key(kubeflowv1.AnnotationMPISSHAuthMountPath), p,
			"must be an absolute path: the .ssh folder of the user MPI runs as, e.g. /home/mpiuser/.ssh"))
	}
	if mc := job.Spec.MainContainer; mc != "" {
		if w := job.Spec.MPIReplicaSpecs[worker]; w != nil && !hasContainer(&w.Template.Spec, mc) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "mainContainer"), mc, "names no container of the Worker template: name one, or remove it to use the first"))
		}
	}
	if n, size := framework.NumReplicas(job.Spec.MPIReplicaSpecs[worker]), configMapBytes(cfg, job); size > maxConfigMapBytes {
		errs = append(errs, field.Invalid(specs.Key(string(worker)).Child("replicas"), n, fmt.Sprintf(
			"the job's ConfigMap %s would list its %d workers in %d bytes, more than the %d a ConfigMap holds: use fewer workers or a shorter job name (a job written at v2beta1 names each host <pod>.<job>.<namespace>.svc)",
			ConfigMapName(job.Name), n, size, maxConfigMapBytes)))
	}
	if c, r := job.Spec.CleanPodPolicy, job.Spec.RunPolicy.CleanPodPolicy; c != nil && r != nil && *c != *r {
		warnings = append(warnings, fmt.Sprintf("spec.cleanPodPolicy (%s) is deprecated and differs from spec.runPolicy.cleanPodPolicy (%s), which applies: remove spec.cleanPodPolicy", *c, *r))
	}
	return errs, warnings
}

// maxConfigMapBytes is what the apiserver lets a ConfigMap's data hold (1 MiB).
const maxConfigMapBytes = 1 << 20

// configMapBytes is the size of the job's ConfigMap data once every worker runs (its
// discover_hosts.sh then lists them all).
func configMapBytes(cfg Config, job *kubeflowv1.MPIJob) int {
	all := make([]int, framework.NumReplicas(job.Spec.MPIReplicaSpecs[worker]))
	for i := range all {
		all[i] = i
	}
	size := len(HostfileName) + len(Hostfile(job)) + len(DiscoverHostsName) + len(DiscoverHosts(job, all))
	if remoteStart(cfg, job) == kubeflowv1.MPIRemoteStartKubectlExec {
		size += len(KubexecName) + len(Kubexec(job))
	}
	return size
}

func hasContainer(spec *corev1.PodSpec, name string) bool {
	for _, c := range spec.Containers {
		if c.Name == name {
			return true
		}
	}
	return false
}
