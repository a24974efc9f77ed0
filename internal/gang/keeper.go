package gang

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kiln-ml/kiln/internal/owned"
)

// Keeper keeps the groups of one controller's jobs: each applied when it is missing or what it
// is built into changed (a job whose group stays the same costs no request per reconcile), read
// from the cache for why its pods wait, deleted when the job no longer runs. It remembers nothing
// itself: what it wrote of a job's group is a Synced the caller keeps with the rest of what it
// remembers of the job (and forgets with it).
type Keeper struct {
	Client  client.Client
	Backend Backend
	// FieldOwner is the server-side-apply field manager.
	FieldOwner string
}

// Synced is what became of the last write of one job's group: the digest of what was applied or
// deleted, or why the apiserver refused it. The zero Synced is a group never written.
type Synced struct {
	sum     [sha256.Size]byte
	refused string
}

// State is what Ensure found: why the group's pods wait ("" when they do not), and whether they
// may be created now.
type State struct {
	Waiting    string
	CreatePods bool
	// Recheck says that nothing watched tells when the wait ends (a group the job does not
	// control is in the way): look again later.
	Recheck bool
}

// Seen is a job's group as the cache showed it, read once per reconcile (Read): what Observe
// reports on and Sync builds on.
type Seen struct {
	obj client.Object
	err error
}

// Read reads the job's group of group's name from the cache.
func (k *Keeper) Read(ctx context.Context, group client.Object) Seen {
	seen := k.Backend.NewObject()
	return Seen{obj: seen, err: k.Client.Get(ctx, client.ObjectKeyFromObject(group), seen)}
}

// Sync keeps a job's group (built by Backend.Object, owned by its job): applied while the job
// runs (Ensure), deleted once it does not (Remove). It is how every controller keeps its groups.
// seen is the group as read this reconcile; last is what was written of it before, and receives
// what is written now.
func (k *Keeper) Sync(ctx context.Context, group client.Object, runs bool, seen Seen, last *Synced) (State, error) {
	if !runs {
		return State{CreatePods: true}, k.Remove(ctx, group, last)
	}
	return k.Ensure(ctx, group, seen, last)
}

// Observe is what Ensure would find in seen, writing nothing: whether the job's pods may be
// created in a reconcile that applies group first, and why they wait. A plan decides from it;
// Sync then carries the plan out.
func (k *Keeper) Observe(group client.Object, seen Seen, last Synced) (State, error) {
	switch err := seen.err; {
	case meta.IsNoMatchError(err):
		return State{Waiting: NotInstalled(k.Backend)}, nil
	case last.refused != "":
		// Its last write was refused (created or changed): no pods until one is taken.
		return State{Waiting: last.refused}, nil
	case apierrors.IsNotFound(err):
		return State{CreatePods: !DelaysPods(k.Backend)}, nil
	case err != nil:
		return State{}, fmt.Errorf("reading %s %s: %w", k.Backend.GroupKind().Kind, group.GetName(), err)
	case seen.obj.GetDeletionTimestamp() != nil:
		return State{Waiting: deletingPrevious(k.Backend)}, nil
	}
	parent, kit := k.parentOf(group)
	if err := kit.Owns(parent, group, seen.obj); err != nil {
		// Never taken over: a group of that name that is not this job's (one made by hand).
		return State{Waiting: err.Error(), Recheck: true}, nil
	}
	waiting := k.Backend.Waiting(seen.obj)
	return State{Waiting: waiting, CreatePods: !DelaysPods(k.Backend) || waiting == ""}, nil
}

func deletingPrevious(b Backend) string {
	return "the " + b.GroupKind().Kind + " of its previous run is still being deleted"
}

// Ensure applies group (built by Backend.Object, owned by its job) unless the cache shows it as
// last applied. Pods may be created once the group exists (Volcano: once it left Pending), never
// while a previous run's group is still being deleted (the scheduler would lose them with it).
// A group the cluster refuses or does not serve is reported in Waiting, with no pods.
func (k *Keeper) Ensure(ctx context.Context, group client.Object, read Seen, last *Synced) (State, error) {
	key := types.NamespacedName{Namespace: group.GetNamespace(), Name: group.GetName()}
	sum, err := digest(group, true)
	if err != nil {
		return State{}, err
	}
	kind := k.Backend.GroupKind().Kind
	seen, getErr := read.obj, read.err
	switch {
	case getErr == nil && seen.GetDeletionTimestamp() != nil:
		*last = Synced{} // applied again once it is gone (its deletion's event)
		return State{Waiting: deletingPrevious(k.Backend)}, nil
	case getErr != nil && !apierrors.IsNotFound(getErr) && !meta.IsNoMatchError(getErr):
		return State{}, fmt.Errorf("reading %s %s: %w", kind, key, getErr)
	case getErr == nil && last.was(sum):
		waiting := k.Backend.Waiting(seen)
		return State{Waiting: waiting, CreatePods: !DelaysPods(k.Backend) || waiting == ""}, nil
	}
	parent, kit := k.parentOf(group)
	err = kit.Apply(ctx, parent, group)
	switch {
	case owned.AsConflict(err) != nil:
		// Never taken over: a group of that name that is not this job's (one made by hand).
		return State{Waiting: owned.AsConflict(err).Error(), Recheck: true}, nil
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		return State{Waiting: NotInstalled(k.Backend)}, nil
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
		// Refused for what the job asks (a priority class that does not exist, say): the job says
		// so, and is retried with backoff should the cluster change.
		refused := fmt.Sprintf("its %s was refused: %s", kind, apiMessage(err))
		*last = Synced{refused: refused}
		return State{Waiting: refused}, err
	case err != nil:
		return State{}, fmt.Errorf("applying %s %s: %w", kind, key, err)
	}
	*last = Synced{sum: sum}
	waiting := ""
	if getErr == nil {
		waiting = k.Backend.Waiting(seen)
	}
	// Just created, Volcano has not admitted it yet; the other schedulers hold pods until they can
	// place the group.
	return State{Waiting: waiting, CreatePods: !DelaysPods(k.Backend) || (getErr == nil && waiting == "")}, nil
}

// Remove deletes a job's group, once per change of what it would be built into; a group of that
// name the job does not control is left alone.
func (k *Keeper) Remove(ctx context.Context, group client.Object, last *Synced) error {
	key := types.NamespacedName{Namespace: group.GetNamespace(), Name: group.GetName()}
	sum, err := digest(group, false)
	if err != nil || last.was(sum) {
		return err
	}
	parent, kit := k.parentOf(group)
	if err := kit.Delete(ctx, parent, group); err != nil && !meta.IsNoMatchError(err) {
		return fmt.Errorf("deleting %s %s: %w", k.Backend.GroupKind().Kind, key, err)
	}
	*last = Synced{sum: sum}
	return nil
}

// apiMessage is what the apiserver said of err, without what wraps it.
func apiMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Message
	}
	return err.Error()
}

// parentOf is the job that controls group (its controller reference), and the kit that writes
// the job's group: the cache holds every group, so it is all that is read.
func (k *Keeper) parentOf(group client.Object) (client.Object, owned.Kit) {
	parent := &metav1.PartialObjectMetadata{}
	kind := "job"
	if ref := metav1.GetControllerOf(group); ref != nil {
		parent.Name, parent.UID, kind = ref.Name, ref.UID, ref.Kind
	}
	return parent, owned.Kit{Client: k.Client, FieldOwner: k.FieldOwner, ParentKind: kind}
}

// was says whether the group was last written as sum.
func (s Synced) was(sum [sha256.Size]byte) bool { return s.refused == "" && s.sum == sum }

// digest identifies a group as built (with its owner, so a new job of the same name differs)
// and whether it is wanted.
func digest(group client.Object, wanted bool) ([sha256.Size]byte, error) {
	built, err := json.Marshal(group)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return sha256.Sum256(append(built, fmt.Sprint(wanted)...)), nil
}
