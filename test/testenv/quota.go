package testenv

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// EnforceQuota creates quota and returns once the apiserver refuses probe by it (a dry-run
// create in the quota's namespace). The apiserver's quota admission reads quotas through an
// informer of its own: an object created before that informer sees a new quota escapes it, which
// a loaded machine makes likely. status, when not nil, is written as the quota's status, for an
// apiserver with no quota controller beside it (envtest).
func EnforceQuota(t testing.TB, c client.Client, quota *corev1.ResourceQuota, status *corev1.ResourceQuotaStatus, probe client.Object) {
	t.Helper()
	ctx := context.Background()
	if err := c.Create(ctx, quota); err != nil {
		t.Fatalf("creating ResourceQuota %s: %v", quota.Name, err)
	}
	if status != nil {
		quota.Status = *status
		if err := c.Status().Update(ctx, quota); err != nil {
			t.Fatalf("writing the status of ResourceQuota %s: %v", quota.Name, err)
		}
	}
	EventuallyWithin(t, time.Minute, func() error {
		p := probe.DeepCopyObject().(client.Object)
		p.SetNamespace(quota.Namespace)
		err := c.Create(ctx, p, client.DryRunAll)
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota: "+quota.Name) {
			return nil
		}
		return fmt.Errorf("a dry run of %s %s in namespace %s, which ResourceQuota %s refuses, gave %v", p.GetObjectKind().GroupVersionKind().Kind, p.GetName(), quota.Namespace, quota.Name, err)
	})
}
