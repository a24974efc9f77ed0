package builder

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainingv1alpha1 "github.com/kiln-ml/kiln/api/training/v1alpha1"
)

// PyJob is a PyJob of one worker running `python train.py` on Image, changed by edits:
//
//	builder.PyJob("bert", ns, func(s *trainingv1alpha1.PyJobSpec) { s.Workers, s.GPU = 4, 1 })
func PyJob(name, ns string, edits ...func(*trainingv1alpha1.PyJobSpec)) *trainingv1alpha1.PyJob {
	p := &trainingv1alpha1.PyJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       trainingv1alpha1.PyJobSpec{Image: Image, Command: []string{"python", "train.py"}},
	}
	for _, edit := range edits {
		edit(&p.Spec)
	}
	return p
}
