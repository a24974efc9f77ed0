package admission

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainerv1alpha1 "github.com/kiln-ml/kiln/api/trainer.kubeflow.org/v1alpha1"
	"github.com/kiln-ml/kiln/test/testenv"
)

// This suite's cluster has no JobSet CRD: kiln still starts, and a TrainJob says what is missing.
func TestTrainJobWithoutJobSetSaysSo(t *testing.T) {
	ready(t)
	ns := env.Namespace(t)
	j := trainJob(func(*trainerv1alpha1.TrainJob) {})(ns)
	if err := env.Client.Create(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, func() error {
		fresh := &trainerv1alpha1.TrainJob{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(j), fresh); err != nil {
			return err
		}
		c := meta.FindStatusCondition(fresh.Status.Conditions, trainerv1alpha1.TrainJobCreated)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "JobSetNotInstalled" || !strings.Contains(c.Message, "install JobSet v0.12") {
			return fmt.Errorf("Created %+v, want JobSetNotInstalled", c)
		}
		return nil
	})
}
