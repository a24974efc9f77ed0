// Package owned is how every kiln controller writes the objects it makes for a parent (a job, an
// InferenceService): create, server-side apply and delete, each only ever touching an object the
// parent controls. An object of the same name that the parent does not control — a user's, another
// job's — is never adopted, overwritten or deleted: the write returns a *Conflict naming the object
// and its owner, which the controller puts in the parent's status.
package owned

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kiln-ml/kiln/internal/tracing"
)

// Kit writes the children of one controller's parents.
type Kit struct {
	// Client writes, and reads from the manager's cache.
	Client client.Client
	// Reader reads the apiserver: for an object no cache holds (one without the labels the caches
	// select, a user's), before a write would replace or delete it (not before a create, which
	// fails on a name taken: see beforeApply). Nil: the cache is the truth (it holds every object
	// of the kind).
	Reader client.Reader
	// FieldOwner is the server-side-apply field manager.
	FieldOwner string
	// Cached is the cache that holds o's kind, when it is not Client's, or nil for a kind no cache
	// holds (read from Reader alone). Nil Cached: Client for every kind. A cache Cached gives
	// holds every object of its kind the parents control (they carry the labels it selects), and
	// the controller watches it, an object's arrival reconciling its parent: Delete takes its word
	// that an object is not there, and so does ApplyAll of a kit that creates new objects (whole
	// answers, or a Creator) for the first object it is to write, which it creates.
	Cached func(o client.Object) client.Reader
	// ParentKind names the parent in conflicts ("TFJob", "InferenceService").
	ParentKind string
	// Wire, when set, sends CreateWatched's and DeleteWatched's writes (the engine's connection
	// for its many pods and services, which decodes no answer); nil: Client.
	Wire Wire
	// Kept says whether existing, an object the parent's kind keeps without a controller
	// reference (so that it outlives the parent: PyJob's Retain claim), is the parent's. Used for
	// objects built without a controller reference only; nil: none is.
	Kept func(parent, existing client.Object) bool
	// Applied, when set, remembers what ApplyAll applied, which it does not send again while
	// nobody changed the object since (see Applied); nil: every apply is sent.
	Applied *Applied
	// WholeAnswers has the apiserver answer each apply with the whole object, which obj receives:
	// for a controller that reads what others set of it (the status, defaults, the replicas an
	// autoscaler keeps). Without it the answer is the object's metadata alone, in protobuf, and
	// obj receives its identity and version: decoding whole answers (a JobSet's pod templates and
	// managedFields) was 4.6 % of the CPU samples of a burst of TrainJobs (docs/performance.md).
	// A kit with whole answers creates new objects rather than applies them (create, handOver),
	// and reads managed fields through Reader (or Client without one), which must not be a cache.
	WholeAnswers bool
	// Creator, when set, has a kit without whole answers create new objects rather than apply
	// them, answered with their metadata, as WholeAnswers does (its Reader must not be a cache
	// either): for a kit that applies an existing object only when it changes (each apply of a
	// kit that creates reads the object's metadata first, to hand a create's fields over:
	// handOver). Nil: a new object is applied, after a read that found none.
	Creator *Creator
}

// Wire creates and deletes objects without reading the apiserver's answers.
type Wire interface {
	Create(ctx context.Context, obj client.Object) error
	// Delete deletes obj if it is still the object of its UID, its dependents in the background.
	Delete(ctx context.Context, obj client.Object) error
}

// Conflict is an object a parent needs whose name something else holds.
type Conflict struct {
	// Kind and Name of the object in the way.
	Kind, Name string
	// Owner is its controller ("TFJob train"), or "" when nothing controls it.
	Owner string
	// ParentKind and Parent are who needed it.
	ParentKind, Parent string
}

func (c *Conflict) Error() string {
	owner := "nothing kiln made"
	if c.Owner != "" {
		owner = c.Owner
	}
	return fmt.Sprintf("%s %s already exists and belongs to %s, not to %s %s: kiln does not take it over; rename the %s or delete that %s",
		c.Kind, c.Name, owner, c.ParentKind, c.Parent, c.ParentKind, c.Kind)
}

// AsConflict is the *Conflict in err's chain, or nil.
func AsConflict(err error) *Conflict {
	var c *Conflict
	if errors.As(err, &c) {
		return c
	}
	return nil
}

// Apply server-side applies obj (built with parent's controller reference) when parent controls
// the object of that name or there is none; otherwise it returns a *Conflict and writes nothing.
// With WholeAnswers or a Creator, an object that does not exist is created instead (create),
// and the first apply to it hands the create's fields to the apply (handOver). An existing object
// is applied with its UID, so the apply fails rather than take over an object that replaced it
// meanwhile.
// obj receives the apiserver's answer: the whole object with WholeAnswers, else its UID,
// resourceVersion, generation and creation time, the rest of it staying as applied.
func (k Kit) Apply(ctx context.Context, parent, obj client.Object) error {
	return k.ApplyAll(ctx, parent, []client.Object{obj}, nil)
}

// ApplyAll is Apply of every object of objs, in order, reading each once: nothing is applied
// unless parent may have every one (the first *Conflict comes back). A kit that creates new
// objects does not read the first object to be written when its cache does not hold it
// (beforeApply): its create, the first write of objs, finds a name taken. before, when given,
// runs between the checks and the writes; by then each object of objs that was read carries its
// UID, and one without a UID is about to be created (a create that finds the parent's own
// object, out of its cache's sight or not in it yet, applies it).
func (k Kit) ApplyAll(ctx context.Context, parent client.Object, objs []client.Object, before func() error) error {
	existing := make([]client.Object, len(objs))
	sums := make([][sha256.Size]byte, len(objs))
	same := make([]bool, len(objs)) // applying it would change nothing (Applied)
	writes := false                 // an object before this one is to be written
	for i, obj := range objs {
		sums[i] = k.Applied.sum(obj) // as built: before the existing object's UID is set
		var err error
		if existing[i], err = k.readFrom(ctx, obj, k.beforeApply(obj, !writes)); err != nil {
			return err
		}
		if existing[i] != nil {
			if err := k.Owns(parent, obj, existing[i]); err != nil {
				return err
			}
			obj.SetUID(existing[i].GetUID())
		}
		same[i] = k.Applied.unchanged(existing[i], sums[i])
		writes = writes || !same[i]
	}
	if before != nil {
		if err := before(); err != nil {
			return err
		}
	}
	for i, obj := range objs {
		sum := sums[i]
		if same[i] {
			// As the apply would have answered: the object as it is — as its cache keeps it, which
			// may be without what the cache drops (an InferenceService's Services: their spec).
			reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(existing[i]).Elem())
			continue
		}
		if existing[i] == nil && k.creates() {
			found, err := k.create(ctx, parent, obj)
			if err != nil {
				return err
			}
			if found == nil {
				k.Applied.record(obj, sum)
				continue
			}
			obj.SetUID(found.GetUID()) // the parent's, come meanwhile: applied
		}
		if k.creates() {
			if err := k.handOver(ctx, obj); err != nil {
				return err
			}
		}
		ctx, end := tracing.Start(ctx, "apply "+kindOf(obj), kindOf(obj), obj.GetNamespace(), obj.GetName())
		err := k.apply(ctx, obj)
		end(err)
		if err != nil {
			return fmt.Errorf("applying %s %s of %s %s: %w", kindOf(obj), obj.GetName(), k.ParentKind, parent.GetName(), err)
		}
		k.Applied.record(obj, sum)
	}
	return nil
}

// beforeApply is where ApplyAll reads an object that obj's cache does not hold: the apiserver
// (Reader), except for a kit that creates new objects (creates), when obj is of a kind a
// cache holds (Cached) and no object before it is to be written (firstWrite). Its create is then
// the first write, fails if the name is taken, and reads the object (foundOnCreate): a conflict
// still leaves every object unwritten. The objects after it are read, so that a conflict of
// theirs comes back before that write. A new endpoint's Deployment is the first object of its
// reconcile's writes, and its Service the first after the Deployment, which the next reconcile
// finds unchanged: the reads before their creates were 400 of the about 1,000 requests kiln sent
// for 200 InferenceServices, and each new one's first reconcile waited for its read; a new
// TrainJob's JobSet is the only object of its ApplyAll (docs/decisions.md, 26).
func (k Kit) beforeApply(obj client.Object, firstWrite bool) client.Reader {
	if firstWrite && k.creates() && k.Cached != nil && k.Cached(obj) != nil {
		return nil
	}
	return k.Reader
}

// creates says whether the kit creates new objects rather than applies them.
func (k Kit) creates() bool { return k.WholeAnswers || k.Creator != nil }

// create creates obj, which its cache (and, where it was read, the apiserver) did not have: found
// is nil when the create made it, else the object of that name it found there (foundOnCreate).
// The serving engine's kit (whole answers) and the TrainJob's (a Creator) create a new child
// rather than apply it: the apiserver makes it for about a quarter of an apply's work (it
// decodes no YAML and merges nothing; docs/decisions.md, 26). The answer is the whole object
// with whole answers or without a Creator (Create), else its metadata.
func (k Kit) create(ctx context.Context, parent, obj client.Object) (found client.Object, _ error) {
	ctx, end := tracing.Start(ctx, "create "+kindOf(obj), kindOf(obj), obj.GetNamespace(), obj.GetName())
	var err error
	if k.WholeAnswers || k.Creator == nil {
		err = k.Client.Create(ctx, obj, client.FieldOwner(k.FieldOwner))
	} else {
		var gvk schema.GroupVersionKind
		if gvk, err = k.Client.GroupVersionKindFor(obj); err == nil {
			err = k.Creator.Create(ctx, gvk, obj, k.FieldOwner)
		}
	}
	end(err)
	switch {
	case err == nil:
		return nil, nil
	case !apierrors.IsAlreadyExists(err):
		return nil, fmt.Errorf("creating %s %s of %s %s: %w", kindOf(obj), obj.GetName(), k.ParentKind, parent.GetName(), err)
	}
	return k.foundOnCreate(ctx, parent, obj)
}

// foundOnCreate is the object of obj's name that a create of obj found there already, read from
// the apiserver: the parent's own (its cache had not shown it yet), or a *Conflict.
func (k Kit) foundOnCreate(ctx context.Context, parent, obj client.Object) (client.Object, error) {
	existing := emptyLike(obj)
	if err := k.apiReader().Get(ctx, client.ObjectKeyFromObject(obj), existing); err != nil {
		return nil, fmt.Errorf("reading %s %s, which exists already: %w", kindOf(obj), obj.GetName(), err)
	}
	return existing, k.Owns(parent, obj, existing)
}

// handOver gives the fields of the existing object of obj's name that the kit's update manager
// holds — those of an object it created — to its apply manager, before it applies obj: an apply
// prunes only fields its own manager held, and a field of the create that obj no longer sets
// (a port, an environment variable) would otherwise stay. The fields the apiserver defaulted at
// the create go with them: pruned, they are defaulted again. It reads the object's metadata from
// the apiserver (the caches drop managed fields), and patches them only when the update manager
// holds any, guarded by the resourceVersion read.
func (k Kit) handOver(ctx context.Context, obj client.Object) error {
	gvk, err := k.Client.GroupVersionKindFor(obj)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		live := &metav1.PartialObjectMetadata{}
		live.SetGroupVersionKind(gvk)
		if err := k.apiReader().Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil {
			return client.IgnoreNotFound(err) // gone: the apply makes it anew
		}
		if live.UID != obj.GetUID() {
			return nil // replaced since it was read: the apply, with obj's UID, fails
		}
		patch, err := csaupgrade.UpgradeManagedFieldsPatch(live, sets.New(k.FieldOwner), k.FieldOwner)
		if err != nil || patch == nil {
			return err
		}
		err = k.Client.Patch(ctx, live, client.RawPatch(types.JSONPatchType, patch))
		switch {
		case err == nil:
			return nil
		case apierrors.IsConflict(err) && attempt < 3:
			continue // changed since read (a rollout's status): read again
		}
		return fmt.Errorf("handing the fields kiln created %s %s with to its server-side apply: %w", kindOf(obj), obj.GetName(), err)
	}
}

// apply sends obj's server-side apply; obj receives the answer (see Apply).
func (k Kit) apply(ctx context.Context, obj client.Object) error {
	opts := []client.PatchOption{client.FieldOwner(k.FieldOwner), client.ForceOwnership}
	if k.WholeAnswers {
		return k.Client.Patch(ctx, obj, client.Apply, opts...) //nolint:staticcheck // typed and unstructured apply alike
	}
	gvk, err := k.Client.GroupVersionKindFor(obj)
	if err != nil {
		return err
	}
	body, err := json.Marshal(obj) // as client.Apply sends it
	if err != nil {
		return err
	}
	// The client sends a PartialObjectMetadata's writes through its metadata client, which asks
	// for the answer as metadata.
	answer := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: obj.GetNamespace(), Name: obj.GetName()}}
	answer.SetGroupVersionKind(gvk)
	if err := k.Client.Patch(ctx, answer, client.RawPatch(types.ApplyPatchType, body), opts...); err != nil {
		return err
	}
	setIdentity(obj, answer)
	return nil
}

// Get reads the parent's object of obj's name into obj, from the cache alone (Cached's, else
// Client's): false when there is none, or one the parent does not control (what a status reports
// on is only ever its own).
func (k Kit) Get(ctx context.Context, parent, obj client.Object) (bool, error) {
	cache := client.Reader(k.Client)
	if k.Cached != nil {
		if c := k.Cached(obj); c != nil {
			cache = c
		}
	}
	err := cache.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return metav1.IsControlledBy(obj, parent), nil
}

// Reasons a parent's status gives when kiln cannot write one of its children (Why).
const (
	// ReasonNameConflict: an object the parent does not control holds the child's name.
	ReasonNameConflict = "NameConflict"
	// ReasonRefused: the apiserver refuses the child (invalid, too large, a policy or a quota).
	ReasonRefused = "Refused"
)

// Why is what a failed write of a child says in its parent's status: ReasonNameConflict or
// ReasonRefused, and the message. Any other error (or nil) comes back as rest, to retry.
func Why(err error) (reason, message string, rest error) {
	if c := AsConflict(err); c != nil {
		return ReasonNameConflict, c.Error(), nil
	}
	if err != nil && Refused(err) {
		return ReasonRefused, err.Error(), nil
	}
	return "", "", err
}

// Refused says whether err is the apiserver refusing a write for what it holds (invalid, too
// large, forbidden by a policy or quota): retrying the same write cannot help, so the parent's
// status says it.
func Refused(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsForbidden(err) || apierrors.IsRequestEntityTooLargeError(err)
}

// Create creates obj unless an object of its name exists; existing (of obj's type) receives what
// is there — obj itself when just created. An object parent does not control is a *Conflict. The
// cache may not have seen an object this parent created moments ago: an AlreadyExists is looked
// up on the apiserver before it is called a conflict.
func (k Kit) Create(ctx context.Context, parent, obj, existing client.Object) error {
	found, err := k.read(ctx, obj)
	switch {
	case err != nil:
		return err
	case found != nil:
		err = k.Owns(parent, obj, found)
	default:
		if found, err = k.create(ctx, parent, obj); found == nil {
			found = obj // created
		}
	}
	if err != nil {
		return err
	}
	reflect.ValueOf(existing).Elem().Set(reflect.ValueOf(found).Elem())
	return nil
}

// CreateWatched creates obj, which the parent's cache shows absent (the caller watches its kind,
// so nothing is read first). Should an object of that name exist all the same, it is read from the
// apiserver: the parent's own (the cache had not shown it yet) is no error, another's a *Conflict.
func (k Kit) CreateWatched(ctx context.Context, parent, obj client.Object) error {
	err := k.wire().Create(ctx, obj)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	_, err = k.foundOnCreate(ctx, parent, obj)
	return err
}

// DeleteWatched deletes seen, an object of the parent's as its cache shows it, by its UID: gone
// already, or replaced meanwhile by a newer object of that name, is done (the newer one stays).
// One the parent does not control is a *Conflict, and left alone.
func (k Kit) DeleteWatched(ctx context.Context, parent, seen client.Object) error {
	if err := k.Owns(parent, seen, seen); err != nil {
		return err
	}
	err := k.wire().Delete(ctx, seen)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// apiReader reads the apiserver (Reader), or the cache when the kit has no Reader.
func (k Kit) apiReader() client.Reader {
	if k.Reader != nil {
		return k.Reader
	}
	return k.Client
}

func (k Kit) wire() Wire {
	if k.Wire != nil {
		return k.Wire
	}
	return clientWire{k.Client}
}

// byUID deletes o only while it is the object of its UID (a newer one of its name stays), its
// dependents in the background: every deletion of the kit.
func byUID(o client.Object) []client.DeleteOption {
	return []client.DeleteOption{client.Preconditions{UID: ptr.To(o.GetUID())}, client.PropagationPolicy(metav1.DeletePropagationBackground)}
}

// clientWire is Wire through a controller-runtime client.
type clientWire struct{ c client.Client }

func (w clientWire) Create(ctx context.Context, obj client.Object) error { return w.c.Create(ctx, obj) }

func (w clientWire) Delete(ctx context.Context, obj client.Object) error {
	return w.c.Delete(ctx, obj, byUID(obj)...)
}

// CreateUnread creates obj, an object kiln holds no right to read back (key material): an
// AlreadyExists counts as created, by an earlier reconcile or process of the parent's (its name
// is the parent's own: "<parent>-ssh").
func (k Kit) CreateUnread(ctx context.Context, parent, obj client.Object) error {
	ctx, end := tracing.Start(ctx, "create "+kindOf(obj), kindOf(obj), obj.GetNamespace(), obj.GetName())
	err := k.Client.Create(ctx, obj)
	end(err)
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating %s %s of %s %s: %w", kindOf(obj), obj.GetName(), k.ParentKind, parent.GetName(), err)
	}
	return nil
}

// DeleteParent deletes the parent itself (its TTL after finishing ran out), by its UID so that a
// newer parent of the same name stays, its children going in the background. deleted is false
// when it was gone already (or replaced): nothing was deleted, and no error.
func (k Kit) DeleteParent(ctx context.Context, parent client.Object) (deleted bool, _ error) {
	ctx, end := tracing.Start(ctx, "delete "+k.ParentKind, k.ParentKind, parent.GetNamespace(), parent.GetName())
	err := k.Client.Delete(ctx, parent, byUID(parent)...)
	end(err)
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return false, nil
	}
	return false, fmt.Errorf("deleting %s %s after its TTL: %w", k.ParentKind, parent.GetName(), err)
}

// Delete deletes the object of obj's name when parent controls it (by its UID, so a newer object
// of the same name stays); one parent does not control, or none, is left alone. Where Cached
// gives obj's kind a cache, an object it does not hold is none: the parent's would be there, or,
// created a moment ago, reconcile the parent again once it is. The apiserver is read otherwise.
// (An InferenceService drops half a dozen kinds it does not use at every reconcile: reading each
// from the apiserver was most of what kiln asked of it; measured: docs/performance.md,
// Measurements behind the code.)
func (k Kit) Delete(ctx context.Context, parent, obj client.Object) error {
	api := k.Reader
	if k.Cached != nil && k.Cached(obj) != nil {
		api = nil // the cache's word
	}
	existing, err := k.readFrom(ctx, obj, api)
	if err != nil || existing == nil || !metav1.IsControlledBy(existing, parent) {
		return err
	}
	k.Applied.forget(existing)
	ctx, end := tracing.Start(ctx, "delete "+kindOf(obj), kindOf(obj), obj.GetNamespace(), obj.GetName())
	err = k.Client.Delete(ctx, existing, byUID(existing)...)
	end(err)
	if err = client.IgnoreNotFound(err); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting %s %s of %s %s: %w", kindOf(obj), obj.GetName(), k.ParentKind, parent.GetName(), err)
	}
	return nil
}

// read is the object of obj's name: from its cache, else from the apiserver; nil when there is none.
func (k Kit) read(ctx context.Context, obj client.Object) (client.Object, error) {
	return k.readFrom(ctx, obj, k.Reader)
}

// readFrom is the object of obj's name: from its cache, else from api unless it is nil; nil when
// there is none.
func (k Kit) readFrom(ctx context.Context, obj client.Object, api client.Reader) (client.Object, error) {
	existing := emptyLike(obj)
	key := client.ObjectKeyFromObject(obj)
	cache := client.Reader(k.Client)
	if k.Cached != nil {
		cache = k.Cached(obj)
	}
	var err error = apierrors.NewNotFound(schema.GroupResource{}, key.Name)
	if cache != nil {
		err = cache.Get(ctx, key, existing)
	}
	if apierrors.IsNotFound(err) && api != nil {
		err = api.Get(ctx, key, existing)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading %s %s: %w", kindOf(obj), obj.GetName(), err)
	}
	return existing, nil
}

// emptyLike is a new object of obj's type and kind to read obj's object into (a copy of obj,
// pod template and all, would only be written over).
func emptyLike(obj client.Object) client.Object {
	empty := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
	empty.GetObjectKind().SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
	return empty
}

// Owns is nil when parent controls existing, the object of obj's name (or keeps it: Kit.Kept),
// else the *Conflict naming existing's owner: the check every write of the kit makes, for callers
// that read the object themselves too.
func (k Kit) Owns(parent, obj, existing client.Object) error {
	if metav1.IsControlledBy(existing, parent) {
		return nil
	}
	if metav1.GetControllerOf(obj) == nil && k.Kept != nil && k.Kept(parent, existing) {
		return nil
	}
	c := &Conflict{Kind: kindOf(obj), Name: obj.GetName(), ParentKind: k.ParentKind, Parent: parent.GetName()}
	if ref := metav1.GetControllerOf(existing); ref != nil {
		c.Owner = ref.Kind + " " + ref.Name
	}
	return c
}

// kindOf is o's kind: its TypeMeta's, else its Go type's name.
func kindOf(o client.Object) string {
	if k := o.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	t := fmt.Sprintf("%T", o)
	return t[strings.LastIndex(t, ".")+1:]
}
