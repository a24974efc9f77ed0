package admission

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// Every way a pod is given a Secret's contents, the node or another identity is a grant, at the
// field that gives it; what any pod of the namespace has is not.
func TestPodGrantsNameEveryFieldThatGives(t *testing.T) {
	secret := &corev1.LocalObjectReference{Name: "s"}
	spec := &corev1.PodSpec{
		ServiceAccountName: "builder",
		HostNetwork:        true,
		ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "registry"}},
		Volumes: []corev1.Volume{
			{Name: "a", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/etc"}}},
			{Name: "b", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}},
			{Name: "c", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: *secret}}}}}},
			{Name: "d", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "x", NodePublishSecretRef: secret}}},
			{Name: "e", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "x"}}},
			{Name: "f", VolumeSource: corev1.VolumeSource{AzureFile: &corev1.AzureFileVolumeSource{SecretName: "s", ShareName: "x"}}},
			{Name: "g", VolumeSource: corev1.VolumeSource{CephFS: &corev1.CephFSVolumeSource{Monitors: []string{"m"}, SecretRef: secret}}},
			{Name: "h", VolumeSource: corev1.VolumeSource{RBD: &corev1.RBDVolumeSource{CephMonitors: []string{"m"}, RBDImage: "i", SecretRef: secret}}},
			{Name: "i", VolumeSource: corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{TargetPortal: "t", IQN: "q", SecretRef: secret}}},
			{Name: "j", VolumeSource: corev1.VolumeSource{FlexVolume: &corev1.FlexVolumeSource{Driver: "x", SecretRef: secret}}},
			{Name: "k", VolumeSource: corev1.VolumeSource{ScaleIO: &corev1.ScaleIOVolumeSource{Gateway: "g", System: "s", SecretRef: secret}}},
			{Name: "l", VolumeSource: corev1.VolumeSource{StorageOS: &corev1.StorageOSVolumeSource{SecretRef: secret}}},
			{Name: "m", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}},
			{Name: "n", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
		},
		Containers: []corev1.Container{{Name: "main",
			Env:             []corev1.EnvVar{{Name: "K", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: *secret, Key: "k"}}}},
			EnvFrom:         []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: *secret}}},
			Ports:           []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}},
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true), Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}}},
	}
	var got []string
	for _, g := range podGrants(spec, field.NewPath("spec")) {
		got = append(got, g.path.String()+": "+g.what)
	}
	want := []string{
		`spec.containers[0].envFrom[0].secretRef: reads Secret "s"`,
		`spec.containers[0].env[0].valueFrom.secretKeyRef: reads Secret "s"`,
		`spec.containers[0].ports[0].hostPort: listens on the node's port 80`,
		`spec.containers[0].securityContext.capabilities.add: adds capabilities [NET_ADMIN]`,
		`spec.containers[0].securityContext.privileged: runs privileged`,
		`spec.hostNetwork: shares the node's namespace`,
		`spec.serviceAccountName: runs as ServiceAccount "builder"`,
		`spec.volumes[0].hostPath: mounts the node's /etc`,
		`spec.volumes[10].scaleIO.secretRef: mounts a volume with Secret "s"`,
		`spec.volumes[11].storageos.secretRef: mounts a volume with Secret "s"`,
		`spec.volumes[1].secret: mounts Secret "s"`,
		`spec.volumes[2].projected.sources[1].secret: mounts Secret "s"`,
		`spec.volumes[3].csi.nodePublishSecretRef: mounts a volume with Secret "s"`,
		`spec.volumes[5].azureFile.secretName: mounts a volume with Secret "s"`,
		`spec.volumes[6].cephfs.secretRef: mounts a volume with Secret "s"`,
		`spec.volumes[7].rbd.secretRef: mounts a volume with Secret "s"`,
		`spec.volumes[8].iscsi.secretRef: mounts a volume with Secret "s"`,
		`spec.volumes[9].flexVolume.secretRef: mounts a volume with Secret "s"`,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("grants (-want +got):\n%s", d)
	}
	if g := podGrants(&corev1.PodSpec{ServiceAccountName: "default", Containers: []corev1.Container{{Name: "main"}}}, field.NewPath("spec")); len(g) != 0 {
		t.Errorf("a pod any principal of the namespace could make has grants %v", g)
	}
}
