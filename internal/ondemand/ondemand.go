// Package ondemand sets a kind's controller up when the first object of the kind exists
// (DECISIONS #24). kiln serves ten kinds and a cluster uses a few: a kind with no object then
// costs kiln the watch of its objects, not a controller's workers and queue, its children's
// watches and their handlers.
package ondemand

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Controller is a runnable of the manager, run by its leader, that waits for the first object of
// Object's kind in Cache and then calls Setup, which sets the kind's controller up: the
// controller then starts at once, the manager running, and reconciles every object there. Object
// is the type the controller watches its kind as: both share the informer.
type Controller struct {
	Kind   string // the kind, as logs and errors name it
	Object client.Object
	Cache  cache.Cache
	Setup  func() error
	Log    logr.Logger
	// NotServed says what to do when the cluster does not serve the kind.
	NotServed string
	// SyncTimeout is how long the watch of the kind's objects may take to fill; 0: two minutes.
	SyncTimeout time.Duration
}

// syncTimeout is how long the watch of a kind's objects may take to fill: controller-runtime's
// default for a controller's sources (CacheSyncTimeout).
const syncTimeout = 2 * time.Minute

// NeedLeaderElection is true: the controllers it sets up run on the leader only.
func (Controller) NeedLeaderElection() bool { return true }

// Start waits for the first object, sets the controller up and returns; without an object it
// returns when ctx ends.
func (c Controller) Start(ctx context.Context) error {
	// A watch that cannot fill (kiln may not list the kind) stops kiln, as a controller's
	// sources that do not sync in time do.
	timeout := c.SyncTimeout
	if timeout == 0 {
		timeout = syncTimeout
	}
	inf, err := c.Cache.GetInformer(ctx, c.Object, cache.BlockUntilSynced(false))
	if meta.IsNoMatchError(err) {
		return fmt.Errorf("watching %ss: %w (%s)", c.Kind, err, c.NotServed)
	}
	if err != nil {
		return fmt.Errorf("watching %ss: %w", c.Kind, err)
	}
	syncCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !toolscache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("watching %ss: not filled in %s (can kiln list them? its ClusterRole, config/rbac)", c.Kind, timeout)
	}
	first := make(chan struct{})
	var once sync.Once
	// A handler added to a synced informer is told of every object it holds: one there already
	// sets the controller up at once.
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(any) { once.Do(func() { close(first) }) }})
	if err != nil {
		return fmt.Errorf("watching %ss: %w", c.Kind, err)
	}
	select {
	case <-ctx.Done():
		return inf.RemoveEventHandler(reg)
	case <-first:
	}
	if err := inf.RemoveEventHandler(reg); err != nil {
		return fmt.Errorf("watching %ss: %w", c.Kind, err)
	}
	c.Log.Info("setting up the controller of a kind at its first object", "kind", c.Kind)
	if err := c.Setup(); err != nil {
		return fmt.Errorf("setting up the %s controller: %w", c.Kind, err)
	}
	return nil
}
