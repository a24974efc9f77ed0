package admission

// What a pod of a kiln kind may be given that its author could not give a pod of their own: a
// principal bound to kiln-edit alone may create jobs, but not pods, in a namespace; kiln (and the
// Job and ReplicaSet controllers) create the pods with their own rights. Such a principal must
// not reach, through a job, what a pod would give them: another ServiceAccount's token, a
// Secret's contents, the node.

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	servingv1alpha1 "github.com/kiln-ml/kiln/api/serving/v1alpha1"
	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
	"github.com/kiln-ml/kiln/internal/accessreview"
	"github.com/kiln-ml/kiln/internal/framework"
)

// PodRights says whether a requester may create pods in a namespace.
type PodRights interface {
	MayCreatePods(ctx context.Context, user authenticationv1.UserInfo, namespace string) (bool, error)
}

// AccessReviews asks the apiserver, with a SubjectAccessReview per question (kiln's ClusterRole
// allows creating them).
type AccessReviews struct{ Client client.Client }

// MayCreatePods asks whether user may create pods in namespace.
func (a AccessReviews) MayCreatePods(ctx context.Context, user authenticationv1.UserInfo, namespace string) (bool, error) {
	sar := accessreview.Of(user)
	sar.Spec.ResourceAttributes = &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "create", Resource: "pods"}
	if err := a.Client.Create(ctx, sar); err != nil {
		return false, fmt.Errorf("asking the apiserver whether %s may create pods in %s: %w", user.Username, namespace, err)
	}
	return sar.Status.Allowed, nil
}

// grant is one thing a pod would be given, at the field that gives it.
type grant struct {
	path *field.Path
	what string
}

// podGrants are what spec gives its pods beyond what any pod of the namespace has: a
// ServiceAccount other than default, Secrets as environment or volumes (the volume plugins that
// are given a Secret's contents too: CSI, Ceph, iSCSI, Azure File, Flex, ...), the node's
// namespaces, paths or ports, privileged containers and added capabilities. (Image pull Secrets
// are not checked: the kubelet pulls with them, the pod never reads them.)
func podGrants(spec *corev1.PodSpec, path *field.Path) []grant {
	var out []grant
	out = append(out, serviceAccountGrant(spec.ServiceAccountName, path.Child("serviceAccountName"))...)
	if spec.ServiceAccountName == "" {
		out = append(out, serviceAccountGrant(spec.DeprecatedServiceAccount, path.Child("serviceAccount"))...)
	}
	for name, on := range map[string]bool{"hostNetwork": spec.HostNetwork, "hostPID": spec.HostPID, "hostIPC": spec.HostIPC} {
		if on {
			out = append(out, grant{path.Child(name), "shares the node's namespace"})
		}
	}
	for i, v := range spec.Volumes {
		vp := path.Child("volumes").Index(i)
		switch {
		case v.HostPath != nil:
			out = append(out, grant{vp.Child("hostPath"), fmt.Sprintf("mounts the node's %s", v.HostPath.Path)})
		case v.Secret != nil:
			out = append(out, grant{vp.Child("secret"), fmt.Sprintf("mounts Secret %q", v.Secret.SecretName)})
		case v.Projected != nil:
			for j, s := range v.Projected.Sources {
				if s.Secret != nil {
					out = append(out, grant{vp.Child("projected", "sources").Index(j).Child("secret"), fmt.Sprintf("mounts Secret %q", s.Secret.Name)})
				}
			}
		default:
			if at, name := volumeSecret(&v.VolumeSource); name != "" {
				out = append(out, grant{vp.Child(at[0], at[1:]...), fmt.Sprintf("mounts a volume with Secret %q", name)})
			}
		}
	}
	for kind, cs := range map[string][]corev1.Container{"initContainers": spec.InitContainers, "containers": spec.Containers} {
		for i := range cs {
			out = append(out, containerGrants(&cs[i], path.Child(kind).Index(i))...)
		}
	}
	sortGrants(out)
	return out
}

// volumeSecret is the Secret a volume plugin is given to mount the volume, and the field that
// names it ("" when it has none).
func volumeSecret(v *corev1.VolumeSource) (at []string, name string) {
	ref := func(r *corev1.LocalObjectReference) string {
		if r == nil {
			return ""
		}
		return r.Name
	}
	switch {
	case v.CSI != nil:
		return []string{"csi", "nodePublishSecretRef"}, ref(v.CSI.NodePublishSecretRef)
	case v.AzureFile != nil:
		return []string{"azureFile", "secretName"}, v.AzureFile.SecretName
	case v.CephFS != nil:
		return []string{"cephfs", "secretRef"}, ref(v.CephFS.SecretRef)
	case v.RBD != nil:
		return []string{"rbd", "secretRef"}, ref(v.RBD.SecretRef)
	case v.ISCSI != nil:
		return []string{"iscsi", "secretRef"}, ref(v.ISCSI.SecretRef)
	case v.FlexVolume != nil:
		return []string{"flexVolume", "secretRef"}, ref(v.FlexVolume.SecretRef)
	case v.ScaleIO != nil:
		return []string{"scaleIO", "secretRef"}, ref(v.ScaleIO.SecretRef)
	case v.StorageOS != nil:
		return []string{"storageos", "secretRef"}, ref(v.StorageOS.SecretRef)
	}
	return nil, ""
}

func sortGrants(gs []grant) {
	slices.SortFunc(gs, func(a, b grant) int { return cmp.Compare(a.path.String(), b.path.String()) })
}

// serviceAccountGrant is a ServiceAccount other than the namespace's default.
func serviceAccountGrant(sa string, path *field.Path) []grant {
	if sa == "" || sa == "default" {
		return nil
	}
	return []grant{{path, fmt.Sprintf("runs as ServiceAccount %q", sa)}}
}

func privilegedGrant(sc *corev1.SecurityContext, path *field.Path) []grant {
	if sc == nil || sc.Privileged == nil || !*sc.Privileged {
		return nil
	}
	return []grant{{path.Child("privileged"), "runs privileged"}}
}

// trainingJobGrants are the grants of every replica's pod template.
func trainingJobGrants(fw framework.Framework, job framework.Job) []grant {
	specs := job.GetReplicaSpecs()
	var out []grant
	for _, rtype := range slices.Sorted(maps.Keys(specs)) {
		if s := specs[rtype]; s != nil {
			out = append(out, podGrants(&s.Template.Spec, field.NewPath("spec", fw.ReplicaSpecsField).Key(string(rtype)).Child("template", "spec"))...)
		}
	}
	return out
}

// pyJobGrants are what a PyJob's spec gives its workers.
func pyJobGrants(job *trainingv1alpha1.PyJob) []grant {
	spec := field.NewPath("spec")
	out := serviceAccountGrant(job.Spec.ServiceAccountName, spec.Child("serviceAccountName"))
	out = append(out, envGrants(job.Spec.Env, nil, spec)...)
	out = append(out, privilegedGrant(job.Spec.ContainerSecurityContext, spec.Child("containerSecurityContext"))...)
	sortGrants(out)
	return out
}

// inferenceServiceGrants are what an InferenceService's spec gives its pods: spec.pod's, and the
// Secret the model fetch reads.
func inferenceServiceGrants(isvc *servingv1alpha1.InferenceService) []grant {
	var out []grant
	if s := isvc.Spec.Storage; s != nil && s.SecretName != "" {
		out = append(out, grant{field.NewPath("spec", "storage", "secretName"), fmt.Sprintf("reads Secret %q", s.SecretName)})
	}
	if p := isvc.Spec.Pod; p != nil {
		path := field.NewPath("spec", "pod")
		out = append(out, serviceAccountGrant(p.ServiceAccountName, path.Child("serviceAccountName"))...)
		out = append(out, envGrants(p.Env, p.EnvFrom, path)...)
		out = append(out, privilegedGrant(p.ContainerSecurityContext, path.Child("containerSecurityContext"))...)
	}
	sortGrants(out)
	return out
}

// containerGrants are what one container is given: Secrets as environment, privilege, added
// capabilities, the node's ports or its host process.
func containerGrants(c *corev1.Container, path *field.Path) []grant {
	out := append(envGrants(c.Env, c.EnvFrom, path), privilegedGrant(c.SecurityContext, path.Child("securityContext"))...)
	if sc := c.SecurityContext; sc != nil {
		if sc.Capabilities != nil && len(sc.Capabilities.Add) > 0 {
			out = append(out, grant{path.Child("securityContext", "capabilities", "add"), fmt.Sprintf("adds capabilities %v", sc.Capabilities.Add)})
		}
		if w := sc.WindowsOptions; w != nil && w.HostProcess != nil && *w.HostProcess {
			out = append(out, grant{path.Child("securityContext", "windowsOptions", "hostProcess"), "runs as a process of the node"})
		}
	}
	for i, p := range c.Ports {
		if p.HostPort != 0 {
			out = append(out, grant{path.Child("ports").Index(i).Child("hostPort"), fmt.Sprintf("listens on the node's port %d", p.HostPort)})
		}
	}
	return out
}

// envGrants are the Secrets environment variables are read from.
func envGrants(env []corev1.EnvVar, from []corev1.EnvFromSource, path *field.Path) []grant {
	var out []grant
	for i, e := range env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			out = append(out, grant{path.Child("env").Index(i).Child("valueFrom", "secretKeyRef"), fmt.Sprintf("reads Secret %q", e.ValueFrom.SecretKeyRef.Name)})
		}
	}
	for i, f := range from {
		if f.SecretRef != nil {
			out = append(out, grant{path.Child("envFrom").Index(i).Child("secretRef"), fmt.Sprintf("reads Secret %q", f.SecretRef.Name)})
		}
	}
	return out
}

// refuseBorrowed refuses the grants of obj that old (nil on create) did not have, when the
// requester may not create pods in the namespace: each error names the field, what it gives and
// the right the requester lacks.
func refuseBorrowed(ctx context.Context, rights PodRights, user authenticationv1.UserInfo, namespace string, now, old []grant) (field.ErrorList, error) {
	fresh := slices.DeleteFunc(slices.Clone(now), func(g grant) bool {
		return slices.ContainsFunc(old, func(o grant) bool { return o.path.String() == g.path.String() && o.what == g.what })
	})
	if len(fresh) == 0 || rights == nil {
		return nil, nil
	}
	may, err := rights.MayCreatePods(ctx, user, namespace)
	if err != nil || may {
		return nil, err
	}
	var errs field.ErrorList
	for _, g := range fresh {
		errs = append(errs, field.Forbidden(g.path, fmt.Sprintf(
			"the pod %s, and %s may not create pods in namespace %s: kiln would create it with its own rights, so only a principal who may create pods there may ask for this; remove it, or have an admin grant you pods (the edit role)",
			g.what, user.Username, namespace)))
	}
	return errs, nil
}
