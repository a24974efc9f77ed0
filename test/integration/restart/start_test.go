package restart

import (
	"strings"
	"testing"

	"github.com/kiln-ml/kiln/internal/manager"
	"github.com/kiln-ml/kiln/test/testenv"
)

// A manager told to serve KServe's InferenceService on a cluster without kiln's serving.kserve.io
// CRDs (this suite's apiserver has none) does not start, and says what to install.
func TestServingKServesKindWithoutItsCRDsSaysWhatToInstall(t *testing.T) {
	o := testenv.ManagerOptions()
	o.Kinds = []string{"kserve-inferenceservice"}
	_, err := manager.New(env.Config, o)
	if err == nil || !strings.Contains(err.Error(), "config/crd/kserve") {
		t.Fatalf("manager.New = %v, want an error that names config/crd/kserve", err)
	}
}
