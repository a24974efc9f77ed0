// Package burst tells when jobs are being submitted into a namespace in a burst — a script or
// pipeline creating them one after another — so that kiln creates their pods, and writes their
// first status, once the burst is in rather than while it arrives.
//
// Why: each create a submitting client makes waits for the apiserver, and while kiln creates the
// pods of the jobs already in, the apiserver, etcd, the scheduler and the kubelets work on those
// pods too. On a small control plane that made a serial submission of 1,000 jobs 25 times slower,
// and the whole batch ran later for it: its last jobs could not start before they were submitted
// (docs/performance.md, While kiln works), and a job's first status write alone costs the
// apiserver about what the submitter's create does. Holding both for the few seconds the burst
// lasts lets it in at full speed; the pods follow at once (DECISIONS #20).
package burst

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/kiln-ml/kiln/internal/metrics"
)

// Rate is how many jobs arriving in one namespace within Window start a burst; it goes on while
// each next job arrives within Window of the one before, and ends once none did, or once it
// lasted MaxHold (jobs that keep coming after that are a stream, not a batch, and wait no
// more). The end is looser than the start on purpose: the pods of the jobs that came before
// the burst was seen slow the submitting client, and a burst that ended when its rate dipped
// let loose the pods that slowed it more — at 300 jobs, two runs in five never got back to
// the rate and took 24 and 43 s to submit, the other three 4–7 s (docs/performance.md, While
// kiln works).
// DefaultMaxHold is kiln's --burst-hold.
const (
	Rate           = 5
	Window         = time.Second
	DefaultMaxHold = 30 * time.Second
)

// Gate notes the jobs that arrive and says whether each waits. A nil Gate holds nothing.
type Gate struct {
	maxHold time.Duration
	clock   clock.WithDelayedExecution

	mu         sync.Mutex
	namespaces map[string]*namespace
	jobs       map[types.UID]*arrived
	forgotAt   time.Time // when forgetOld last ran
}

// namespace is what the Gate knows of one namespace: when jobs arrived there within the last
// Window, oldest first; when the burst going on there started (zero, or stale once it ended:
// none); the wake-ups of the jobs waiting for it to end (one per job and controller that
// asked), and whether a timer will check when that end is due.
type namespace struct {
	at      []time.Time
	since   time.Time
	wakes   map[waiter]wake
	checked bool
}

// wake queues a held job with one of its controllers; arrived orders the wakes.
type wake struct {
	arrived time.Time
	queue   func()
}

// waiter is a job held for one of its controllers, woken through that controller's Wakes.
type waiter struct {
	uid   types.UID
	wakes *Wakes
}

// arrived is when a job arrived, in which namespace, the Wakes of the controllers that were
// told to hold it (none: it was not held), and whether it waits no longer. A released job is
// kept until its MaxHold ran out, so that a controller that hears of it late neither notes it
// again nor holds it.
type arrived struct {
	namespace string
	at        time.Time
	heldFor   []*Wakes
	released  bool
}

// New returns a Gate that holds a job for maxHold at most (0: never), timed by clk.
func New(maxHold time.Duration, clk clock.WithDelayedExecution) *Gate {
	return &Gate{maxHold: maxHold, clock: clk, namespaces: map[string]*namespace{}, jobs: map[types.UID]*arrived{}}
}

// Arrived notes that job uid was created in ns just now: not a job kiln found when it started.
// A job is noted once, however many of its controllers tell of it.
func (g *Gate) Arrived(ns string, uid types.UID) {
	if g == nil || g.maxHold <= 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.jobs[uid] != nil {
		return
	}
	now := g.clock.Now()
	n := g.namespaces[ns]
	if n == nil {
		n = &namespace{}
		g.namespaces[ns] = n
	}
	n.prune(now)
	if !g.bursting(n, now) {
		n.since = time.Time{}
	}
	n.at = append(n.at, now)
	if n.since.IsZero() && len(n.at) >= Rate {
		n.since = now
	}
	g.jobs[uid] = &arrived{namespace: ns, at: now}
	if now.Sub(g.forgotAt) >= Window {
		g.forgetOld(now)
	}
}

// Hold says whether what obj's controller makes and writes for it waits yet — its pods, and its
// first status — until the burst going on in its namespace ends (no job arrived there within
// the last Window) and no longer than MaxHold after it arrived. While it waits, wakes (the asking
// controller's) queues obj once when the burst ends; the returned duration is when obj's MaxHold
// runs out, for the caller to look again then should the burst go on. 0: go on now; once it says
// 0 for a job it says 0 for it again, to every controller.
func (g *Gate) Hold(obj client.Object, wakes *Wakes) time.Duration {
	if g == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	uid := obj.GetUID()
	j := g.jobs[uid]
	if j == nil {
		return 0
	}
	now := g.clock.Now()
	n := g.namespaces[j.namespace] // nil: no job arrived there within the Window
	left := j.at.Add(g.maxHold).Sub(now)
	if j.released || !g.bursting(n, now) || left <= 0 {
		g.release(j, now)
		if n != nil {
			// This controller goes on now; the job's others are woken by the check as planned.
			delete(n.wakes, waiter{uid, wakes})
		}
		return 0
	}
	if n.wakes == nil {
		n.wakes = map[waiter]wake{}
	}
	if w := (waiter{uid, wakes}); n.wakes[w].queue == nil {
		n.wakes[w] = wake{arrived: j.at, queue: wakes.of(obj)}
	}
	if !slices.Contains(j.heldFor, wakes) {
		j.heldFor = append(j.heldFor, wakes)
	}
	if !n.checked {
		n.checked = true
		g.clock.AfterFunc(g.ends(n, now), func() { go g.check(j.namespace) })
	}
	return left
}

// release marks j as waiting no longer and, the first time, counts how long it did (MaxHold at
// most: a job deleted while held is released only when forgotten).
func (g *Gate) release(j *arrived, now time.Time) {
	if j.released {
		return
	}
	j.released = true
	if len(j.heldFor) > 0 {
		metrics.BurstHold.Observe(metrics.Seconds(min(now.Sub(j.at), g.maxHold)))
	}
}

// check wakes the jobs waiting for ns's burst once it ended, or looks again when it may have. It
// runs on a goroutine of its own: a clock may call its timers' functions holding a lock.
func (g *Gate) check(ns string) {
	g.mu.Lock()
	n := g.namespaces[ns]
	if n == nil {
		g.mu.Unlock()
		return
	}
	now := g.clock.Now()
	if g.bursting(n, now) {
		g.clock.AfterFunc(g.ends(n, now), func() { go g.check(ns) })
		g.mu.Unlock()
		return
	}
	// The jobs that arrived first are queued first: the workers take a batch up in the order it
	// was submitted.
	wakes := slices.SortedFunc(maps.Values(n.wakes), func(a, b wake) int {
		return a.arrived.Compare(b.arrived)
	})
	n.wakes, n.checked = nil, false
	g.mu.Unlock()
	for _, w := range wakes {
		w.queue()
	}
}

// bursting says whether a burst goes on in n: it started less than MaxHold ago and a job arrived
// within the last Window. A nil namespace (none arrived within the Window) has none.
func (g *Gate) bursting(n *namespace, now time.Time) bool {
	return n != nil && !n.since.IsZero() && len(n.at) > 0 &&
		now.Sub(n.at[len(n.at)-1]) < Window && now.Sub(n.since) < g.maxHold
}

// ends is how soon, from now, the burst going on in n ends should no job arrive from now on:
// a Window after its newest arrival, or MaxHold after it started.
func (g *Gate) ends(n *namespace, now time.Time) time.Duration {
	end := min(n.at[len(n.at)-1].Add(Window).Sub(now), n.since.Add(g.maxHold).Sub(now))
	return max(end, time.Millisecond)
}

// Arrivals is the predicate that tells g of each object that arrives: created while kiln runs
// (not found by its first list) and new (no status yet: isNew). Put on a controller's For, it
// runs before the object's first reconcile, which asks Hold. It filters nothing out.
func (g *Gate) Arrivals(isNew func(client.Object) bool) predicate.Funcs {
	return predicate.Funcs{CreateFunc: func(e event.CreateEvent) bool {
		if !e.IsInInitialList && isNew(e.Object) {
			g.Arrived(e.Object.GetNamespace(), e.Object.GetUID())
		}
		return true
	}}
}

// prune forgets the arrivals that left the Window by now.
func (n *namespace) prune(now time.Time) {
	i := 0
	for i < len(n.at) && now.Sub(n.at[i]) >= Window {
		i++
	}
	n.at = n.at[i:]
}

// forgetOld forgets the jobs that arrived more than MaxHold ago (they wait no longer; deleted
// jobs are never asked about again) with their wakes, and the namespaces with no arrival in the
// Window and no job waiting.
func (g *Gate) forgetOld(now time.Time) {
	g.forgotAt = now
	for uid, j := range g.jobs {
		if now.Sub(j.at) < g.maxHold {
			continue
		}
		g.release(j, now)
		if n := g.namespaces[j.namespace]; n != nil {
			for _, w := range j.heldFor {
				delete(n.wakes, waiter{uid, w})
			}
		}
		delete(g.jobs, uid)
	}
	for ns, n := range g.namespaces {
		if n.prune(now); len(n.at) == 0 && len(n.wakes) == 0 {
			delete(g.namespaces, ns)
		}
	}
}

// Wakes wake a controller's held objects: Source goes into the controller's watches, and Hold
// is given the Wakes of the controller that asks. A wake adds the object's key to the
// controller's queue (which merges repeats), never blocking; before the controller starts it
// does nothing, and the held object's own requeue (Hold's duration) looks again. The zero Wakes
// is ready to use.
type Wakes struct {
	queue atomic.Pointer[workqueue.TypedRateLimitingInterface[reconcile.Request]]
}

// Source hands Wakes the controller's queue.
func (w *Wakes) Source() source.Source {
	return source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		w.queue.Store(&q)
		return nil
	})
}

// of is the wake of obj: it queues obj's key. A nil Wakes wakes nothing.
func (w *Wakes) of(obj client.Object) func() {
	key := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)}
	return func() {
		if w == nil {
			return
		}
		if q := w.queue.Load(); q != nil {
			(*q).Add(key)
		}
	}
}
