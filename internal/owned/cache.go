package owned

import (
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kiln-ml/kiln/internal/watchtrim"
)

// NewCache is a controller's own cache of the objects it makes, started with the manager: only
// those selector matches (a label kiln puts on them), in the manager's namespaces (none: all),
// without managedFields; byObject sets what differs per kind (a transform). The watch events of
// the specless kinds (built-in kinds; byObject's transforms must drop their spec) come without
// their spec (watchtrim.ForCache, which would also decode typed custom resources in one pass;
// these caches hold none: their optional kinds are unstructured). The manager's cache has one
// selector per kind, already taken by another controller's children, hence one of its own.
func NewCache(mgr ctrl.Manager, namespaces []string, selector labels.Selector, byObject map[client.Object]cache.ByObject, specless ...schema.GroupVersionKind) (cache.Cache, error) {
	opts := cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient(),
		DefaultLabelSelector: selector,
		DefaultTransform:     cache.TransformStripManagedFields(),
		ByObject:             byObject,
	}
	if len(specless) > 0 {
		if err := watchtrim.ForCache(&opts, mgr.GetConfig(), specless, nil); err != nil {
			return nil, err
		}
	}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	c, err := cache.New(mgr.GetConfig(), opts)
	if err != nil {
		return nil, err
	}
	return c, mgr.Add(c)
}
