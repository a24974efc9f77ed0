package tensorflow

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	kubeflowv1 "github.com/kiln-ml/kiln/api/kubeflow.org/v1"
	"github.com/kiln-ml/kiln/internal/framework"
)

// tfConfig is TF_CONFIG as TensorFlow reads it. Field order and the sorted keys of cluster are
// what encoding/json produces and what Kubeflow users see byte for byte.
type tfConfig struct {
	Cluster     map[string][]string `json:"cluster"`
	Task        task                `json:"task"`
	Environment string              `json:"environment"`
}

type task struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
}

// sparseTFConfig is the dynamic-worker TF_CONFIG: each worker knows itself and the PS. Unlike
// Kubeflow (DECISIONS #10) it names the chief too, which TensorFlow needs to find it.
type sparseTFConfig struct {
	Cluster sparseCluster `json:"cluster"`
	Task    task          `json:"task"`
}

type sparseCluster struct {
	Worker map[string]string `json:"worker"`
	PS     []string          `json:"ps"`
	Chief  []string          `json:"chief,omitempty"`
	Master []string          `json:"master,omitempty"`
}

// setClusterSpec appends TF_CONFIG to the tensorflow container of a distributed job (more than
// one replica in all); a single-replica job runs locally and gets none.
func setClusterSpec(cfg Config, job *kubeflowv1.TFJob, t *corev1.PodTemplateSpec, rtype kubeflowv1.ReplicaType, index int) error {
	if framework.TotalReplicas(job.Spec.TFReplicaSpecs) == 1 {
		return nil
	}
	value, err := TFConfig(cfg, job, rtype, index)
	if err != nil {
		return err
	}
	framework.AppendEnv(t, ContainerName, framework.Env("TF_CONFIG", value))
	return nil
}

// TFConfig is the TF_CONFIG value of replica (rtype, index).
func TFConfig(cfg Config, job *kubeflowv1.TFJob, rtype kubeflowv1.ReplicaType, index int) (string, error) {
	cluster := clusterHosts(cfg, job)
	t := task{Type: strings.ToLower(string(rtype)), Index: index}
	var v any = tfConfig{Cluster: cluster, Task: t, Environment: "cloud"}
	if job.Spec.EnableDynamicWorker {
		v = sparse(cluster, t)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encoding TF_CONFIG of %s: %w", framework.ReplicaName(job.Name, rtype, index), err)
	}
	return string(b), nil
}

// clusterHosts maps every replica type of the job (lowercase) to its replicas' service addresses.
func clusterHosts(cfg Config, job *kubeflowv1.TFJob) map[string][]string {
	domain := ""
	if cfg.ClusterDomain != "" {
		domain = "." + cfg.ClusterDomain
	}
	cluster := map[string][]string{}
	for rtype, spec := range job.Spec.TFReplicaSpecs {
		port := framework.ContainerPort(spec, ContainerName, PortName, Port)
		n := int(framework.NumReplicas(spec))
		hosts := make([]string, 0, n)
		for i := range n {
			hosts = append(hosts, fmt.Sprintf("%s.%s.svc%s:%d", framework.ReplicaName(job.Name, rtype, i), job.Namespace, domain, port))
		}
		cluster[strings.ToLower(string(rtype))] = hosts
	}
	return cluster
}

func sparse(cluster map[string][]string, t task) sparseTFConfig {
	s := sparseCluster{Worker: map[string]string{}, PS: []string{}, Chief: cluster["chief"], Master: cluster["master"]}
	switch t.Type {
	case "worker":
		if t.Index < len(cluster["worker"]) {
			s.Worker[fmt.Sprint(t.Index)] = cluster["worker"][t.Index]
		}
		s.PS = append(s.PS, cluster["ps"]...)
	case "ps":
		if t.Index < len(cluster["ps"]) {
			s.PS = append(s.PS, cluster["ps"][t.Index])
		}
	}
	return sparseTFConfig{Cluster: s, Task: t}
}
