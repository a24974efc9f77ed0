package devcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// The local cluster runs no container, so kwok serves each pod's log: a training run's output
// for a job's containers, a model server's for an InferenceService's. `kubectl logs` and
// `kubectl kiln logs` print these lines on it.
var (
	trainingLog = []string{
		"kiln local cluster: kwok plays this node, no container runs; this is simulated training output",
		"loading dataset: 60000 examples",
		"epoch 1/3  loss=0.912  accuracy=0.712",
		"epoch 2/3  loss=0.544  accuracy=0.838",
		"epoch 3/3  loss=0.301  accuracy=0.914",
		"saved the model",
	}
	// previousTrainingLog is what a restarted container's previous run printed (kubectl logs
	// --previous).
	previousTrainingLog = []string{
		"kiln local cluster: kwok plays this node, no container runs; this is a simulated previous run",
		"loading dataset: 60000 examples",
		"epoch 1/3  loss=0.917  accuracy=0.705",
		"killed: out of memory",
	}
	servingLog = []string{
		"kiln local cluster: kwok plays this node, no container runs; this is a simulated model server",
		"loading the model from /mnt/models",
		"model ready: serving HTTP on :8080",
	}
	// servingContainers are the containers that serve a model (kiln's and KServe's).
	servingContainers = []string{"predictor", "kserve-container"}
)

// simulatedLogs writes the log files kwok serves into dir, in the CRI format a kubelet keeps,
// and the ClusterLogs configuration that points every pod at them; it returns that
// configuration's path, for kwokctl's -c.
func simulatedLogs(dir string, now time.Time) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	write := func(name string, lines []string) (string, error) {
		var b strings.Builder
		for i, l := range lines {
			fmt.Fprintf(&b, "%s stdout F %s\n", now.Add(time.Duration(i)*time.Second).UTC().Format(time.RFC3339Nano), l)
		}
		path := filepath.Join(dir, name)
		return path, os.WriteFile(path, []byte(b.String()), 0o644)
	}
	training, err := write("training.log", trainingLog)
	if err != nil {
		return "", err
	}
	previous, err := write("training-previous.log", previousTrainingLog)
	if err != nil {
		return "", err
	}
	serving, err := write("serving.log", servingLog)
	if err != nil {
		return "", err
	}
	conf := map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1",
		"kind":       "ClusterLogs",
		"metadata":   map[string]any{"name": "kiln-simulated-output"},
		"spec": map[string]any{
			"selector": map[string]any{},
			"logs": []any{
				map[string]any{"containers": servingContainers, "logsFile": serving, "previousLogsFile": serving, "follow": true},
				map[string]any{"logsFile": training, "previousLogsFile": previous, "follow": true},
			},
		},
	}
	b, err := yaml.Marshal(conf)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "cluster-logs.yaml")
	return path, os.WriteFile(path, b, 0o644)
}
