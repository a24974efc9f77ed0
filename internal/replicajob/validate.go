package replicajob

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validation"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
	"github.com/kiln-ml/kiln/internal/netpol"
)

// ManagedByValues are the controllers runPolicy.managedBy may name: kiln (under Kubeflow's name,
// so existing manifests work) or Kueue's MultiKueue, which leaves the job to another cluster.
var ManagedByValues = []string{kubeflowv1.KubeflowJobsController, kubeflowv1.MultiKueueController}

// maxServiceName is the longest name a Service may have (a DNS-1035 label).
const maxServiceName = 63

// Validate checks a defaulted job against the rules of Kubeflow's validating webhooks
// (reference §1.5) with kiln's decisions applied: replica types are checked after their case
// is normalised, an omitted Master replicas means 1, and managedBy is checked and immutable on
// every kind. old is nil on create. Errors come in a fixed order; warnings are for the user.
func Validate(fw framework.Framework, job, old framework.Job) (field.ErrorList, []string) {
	var errs field.ErrorList
	name := job.GetName()
	for _, msg := range validation.NameIsDNS1035Label(name, false) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), name, msg))
	}
	specsPath := field.NewPath("spec", fw.ReplicaSpecsField)
	specs := job.GetReplicaSpecs()
	if len(specs) == 0 {
		errs = append(errs, field.Required(specsPath, "name at least one replica type: "+typeList(fw)))
	}
	for _, rtype := range sortedTypes(fw, specs) {
		errs = append(errs, validateReplica(fw, job, rtype, specs[rtype], specsPath.Key(string(rtype)))...)
	}
	errs = append(errs, validateTotal(fw, specs, specsPath)...)
	errs = append(errs, validateManagedBy(job, old)...)
	errs = append(errs, netpol.Validate(job.GetAnnotations())...)
	var warnings []string
	if fw.Validate != nil {
		e, w := fw.Validate(job, specsPath)
		errs, warnings = append(errs, e...), w
	}
	return errs, warnings
}

// validateReplica checks one replica spec: a known type, containers with images, the framework's
// default container, and names short enough for the Services the job creates.
func validateReplica(fw framework.Framework, job framework.Job, rtype kubeflowv1.ReplicaType, spec *kubeflowv1.ReplicaSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !slices.Contains(fw.ReplicaTypes, rtype) {
		if same := CanonicalType(fw, rtype); same != rtype {
			return append(errs, field.Duplicate(path, fmt.Sprintf("%s names the same replica type as %s (case does not count): keep one of them", rtype, same)))
		}
		return append(errs, field.NotSupported(path, string(rtype), typeStrings(fw)))
	}
	if spec == nil {
		return append(errs, field.Required(path, "give the replica spec (replicas and template), or remove the entry"))
	}
	if spec.Replicas != nil && *spec.Replicas < 0 {
		errs = append(errs, field.Invalid(path.Child("replicas"), *spec.Replicas, "must be 0 or more"))
	}
	errs = append(errs, validateTemplate(&spec.Template, path.Child("template"))...)
	containers := spec.Template.Spec.Containers
	cpath := path.Child("template", "spec", "containers")
	if len(containers) == 0 {
		if fw.DefaultContainer == "" {
			return append(errs, field.Required(cpath, "must be specified: add the container to run"))
		}
		return append(errs, field.Required(cpath, fmt.Sprintf("must be specified: add a container named %s", fw.DefaultContainer)))
	}
	hasDefault := false
	for i, c := range containers {
		if c.Image == "" {
			errs = append(errs, field.Required(cpath.Index(i).Child("image"), "must be set: the container image to run"))
		}
		hasDefault = hasDefault || c.Name == fw.DefaultContainer
	}
	if !hasDefault && fw.DefaultContainer != "" {
		errs = append(errs, field.Required(cpath, fmt.Sprintf("must have at least one container with name %s (it gets the job's port and its exit code decides restarts)", fw.DefaultContainer)))
	}
	if n := framework.NumReplicas(spec); n > 0 {
		jobName := job.GetName()
		if last := fw.PodNameOf(job, rtype, int(n)-1); len(last) > maxServiceName {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), jobName, fmt.Sprintf(
				"must be at most %d characters: the pod (and Service) of the last %s replica would be named %s, longer than the %d a hostname allows",
				maxServiceName-(len(last)-len(jobName)), rtype, last, maxServiceName)))
		}
	}
	return errs
}

// validateTotal bounds the job's replicas, all types together, by its kind's limit; the error
// names the replicas of its largest type.
func validateTotal(fw framework.Framework, specs map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec, specsPath *field.Path) field.ErrorList {
	total := framework.TotalReplicas(specs)
	var largest kubeflowv1.ReplicaType
	for _, rtype := range sortedTypes(fw, specs) {
		if largest == "" || framework.NumReplicas(specs[rtype]) > framework.NumReplicas(specs[largest]) {
			largest = rtype
		}
	}
	limit := fw.ReplicaLimit()
	if total <= int64(limit) {
		return nil
	}
	why := ""
	if fw.MaxReplicasWhy != "" {
		why = " (" + fw.MaxReplicasWhy + ")"
	}
	return field.ErrorList{field.Invalid(specsPath.Key(string(largest)).Child("replicas"), framework.NumReplicas(specs[largest]), fmt.Sprintf(
		"the job has %d replicas in all, and a %s may have at most %d%s: see docs/limits.md", total, fw.Kind, limit, why))}
}

// validateTemplate checks what of a replica's pod template the apiserver would refuse in its
// pods, which the CRD schema (Kubernetes' own types, unvalidated) lets through: labels and
// annotations, container names, ports and environment variable names. Without it such a job
// is accepted and never gets a pod (FuzzAcceptedJobsMakeValidChildren finds these).
func validateTemplate(t *corev1.PodTemplateSpec, path *field.Path) field.ErrorList {
	meta := path.Child("metadata")
	errs := metavalidation.ValidateLabels(t.Labels, meta.Child("labels"))
	errs = append(errs, validation.ValidateAnnotations(t.Annotations, meta.Child("annotations"))...)
	spec := path.Child("spec")
	names := map[string]bool{}
	for _, kind := range []struct {
		field string
		cs    []corev1.Container
	}{{"initContainers", t.Spec.InitContainers}, {"containers", t.Spec.Containers}} {
		for i, c := range kind.cs {
			cp := spec.Child(kind.field).Index(i)
			for _, msg := range utilvalidation.IsDNS1123Label(c.Name) {
				errs = append(errs, field.Invalid(cp.Child("name"), c.Name, msg))
			}
			if names[c.Name] {
				errs = append(errs, field.Duplicate(cp.Child("name"), c.Name))
			}
			names[c.Name] = true
			errs = append(errs, validatePorts(c.Ports, cp.Child("ports"))...)
			errs = append(errs, ValidateEnvNames(c.Env, c.EnvFrom, cp)...)
		}
	}
	return errs
}

// ValidateEnvNames refuses the environment variable names and envFrom prefixes a container may
// not have (printable ASCII but '=', as the apiserver has taken since Kubernetes 1.34), each at
// path's env[i].name or envFrom[i].prefix. A name given twice is allowed, as in a pod.
func ValidateEnvNames(env []corev1.EnvVar, from []corev1.EnvFromSource, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, e := range env {
		for _, msg := range utilvalidation.IsRelaxedEnvVarName(e.Name) {
			errs = append(errs, field.Invalid(path.Child("env").Index(i).Child("name"), e.Name, msg))
		}
	}
	for i, f := range from {
		if f.Prefix == "" {
			continue
		}
		for _, msg := range utilvalidation.IsRelaxedEnvVarName(f.Prefix) {
			errs = append(errs, field.Invalid(path.Child("envFrom").Index(i).Child("prefix"), f.Prefix, msg))
		}
	}
	return errs
}

// validatePorts checks a container's ports as the apiserver does.
func validatePorts(ports []corev1.ContainerPort, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := map[string]bool{}
	for i, p := range ports {
		pp := path.Index(i)
		if p.ContainerPort == 0 {
			errs = append(errs, field.Required(pp.Child("containerPort"), "the port number, 1 to 65535"))
		}
		for _, msg := range utilvalidation.IsValidPortNum(int(p.ContainerPort)) {
			if p.ContainerPort != 0 {
				errs = append(errs, field.Invalid(pp.Child("containerPort"), p.ContainerPort, msg))
			}
		}
		if p.Name != "" {
			for _, msg := range utilvalidation.IsValidPortName(p.Name) {
				errs = append(errs, field.Invalid(pp.Child("name"), p.Name, msg))
			}
			if names[p.Name] {
				errs = append(errs, field.Duplicate(pp.Child("name"), p.Name))
			}
			names[p.Name] = true
		}
		if protocols := []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP}; p.Protocol != "" && !slices.Contains(protocols, p.Protocol) {
			errs = append(errs, field.NotSupported(pp.Child("protocol"), p.Protocol, protocols))
		}
	}
	return errs
}

// validateManagedBy allows only known controllers in runPolicy.managedBy and forbids changing it.
func validateManagedBy(job, old framework.Job) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("spec", "runPolicy", "managedBy")
	mb := job.GetRunPolicy().ManagedBy
	if mb != nil && !slices.Contains(ManagedByValues, *mb) {
		errs = append(errs, field.NotSupported(path, *mb, ManagedByValues))
	}
	if old != nil {
		was := old.GetRunPolicy().ManagedBy
		if deref(mb) != deref(was) {
			errs = append(errs, field.Invalid(path, deref(mb), fmt.Sprintf("field is immutable (was %q): create a new job to hand it to another controller", deref(was))))
		}
	}
	return errs
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// sortedTypes lists the keys of specs: the framework's types in its order, then unknown ones sorted.
func sortedTypes(fw framework.Framework, specs map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec) []kubeflowv1.ReplicaType {
	var known, unknown []kubeflowv1.ReplicaType
	for _, t := range fw.ReplicaTypes {
		if _, ok := specs[t]; ok {
			known = append(known, t)
		}
	}
	for t := range specs {
		if !slices.Contains(fw.ReplicaTypes, t) {
			unknown = append(unknown, t)
		}
	}
	slices.Sort(unknown)
	return append(known, unknown...)
}

func typeStrings(fw framework.Framework) []string {
	out := make([]string, len(fw.ReplicaTypes))
	for i, t := range fw.ReplicaTypes {
		out[i] = string(t)
	}
	return out
}

func typeList(fw framework.Framework) string { return strings.Join(typeStrings(fw), ", ") }
