package burst

import (
	"fmt"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kiln-ml/kiln/internal/metrics"
)

var t0 = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

// job is a job of namespace ns with uid and name job-<i>.
func job(ns string, i int) client.Object {
	name := fmt.Sprintf("job-%d", i)
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name)}}
}

// queued is Wakes on a queue of their own, as a controller's Source would hand them theirs.
func queued(t *testing.T) (*Wakes, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	t.Cleanup(q.ShutDown)
	w := &Wakes{}
	w.queue.Store(&q)
	return w, q
}

// waitQueued waits until q holds n keys (wakes run on a goroutine of their own).
func waitQueued(q workqueue.TypedRateLimitingInterface[reconcile.Request], n int) int {
	for deadline := time.Now().Add(5 * time.Second); q.Len() < n && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond) // and no more come
	return q.Len()
}

// A script submitting a job every 10 ms: the first Rate-1 arrive before any burst and are not
// held; from the Rate-th on, a job's pods wait, and every waiting job is woken once the
// submissions stop for long enough.
func TestAJobWaitsForTheBurstItArrivedIn(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	g := New(30*time.Second, clk)
	wakes, q := queued(t)
	for i := range 100 {
		j := job("team-a", i)
		g.Arrived(j.GetNamespace(), j.GetUID())
		held := g.Hold(j, wakes) > 0
		if i < Rate-1 && held {
			t.Errorf("job %d of the first %d held", i, Rate-1)
		}
		if i >= Rate-1 && !held {
			t.Errorf("job %d: not held in a burst", i)
		}
		clk.Step(10 * time.Millisecond)
	}
	// A lone job of another namespace is not held by team-a's burst.
	lone := job("team-b", 0)
	g.Arrived(lone.GetNamespace(), lone.GetUID())
	if got := g.Hold(lone, wakes); got != 0 {
		t.Errorf("a lone job of another namespace held %v", got)
	}
	// The 100th arrived at 990 ms; the burst ends once none arrived for a Window, at 1.99 s.
	// Nobody is woken before.
	clk.SetTime(t0.Add(1990*time.Millisecond - time.Millisecond))
	if n := waitQueued(q, 0); n != 0 {
		t.Fatalf("%d woken before the burst ended", n)
	}
	clk.SetTime(t0.Add(1990 * time.Millisecond))
	if n := waitQueued(q, 100-(Rate-1)); n != 100-(Rate-1) {
		t.Errorf("%d woken at the burst's end, want the %d held", n, 100-(Rate-1))
	}
	for i := Rate - 1; q.Len() > 0; i++ { // in the order they arrived
		key, _ := q.Get()
		if want := job("team-a", i).GetName(); key.Name != want {
			t.Fatalf("woken %d-th: %s, want %s (the order the jobs arrived in)", i-(Rate-1), key.Name, want)
		}
		q.Done(key)
	}
	if got := g.Hold(job("team-a", 50), wakes); got != 0 {
		t.Errorf("held %v once the burst ended, want 0", got)
	}
}

// A burst goes on while its jobs keep coming, however much slower than they started (the
// submitting client slowed by the pods of the jobs before it); the namespace is quiet for a
// Window, and the next jobs, fewer than Rate a Window, start no burst and are not held.
func TestABurstGoesOnWhileItsJobsKeepComing(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	g := New(30*time.Second, clk)
	wakes, q := queued(t)
	arrive := func(i int) bool {
		j := job("ns", i)
		g.Arrived(j.GetNamespace(), j.GetUID())
		return g.Hold(j, wakes) > 0
	}
	held := 0
	for i := range Rate { // the Rate-th starts the burst
		if arrive(i) {
			held++
		}
		clk.Step(10 * time.Millisecond)
	}
	for i := Rate; i < Rate+20; i++ { // then 3 a second, for 6 s
		clk.Step(300*time.Millisecond - 10*time.Millisecond)
		if !arrive(i) {
			t.Fatalf("job %d, %v after the one before, not held: the burst ended while its jobs kept coming", i, 300*time.Millisecond)
		}
		held++
		clk.Step(10 * time.Millisecond)
	}
	if n := waitQueued(q, 0); n != 0 {
		t.Fatalf("%d woken while the burst went on", n)
	}
	clk.Step(Window - 10*time.Millisecond)
	if held != 21 {
		t.Errorf("%d jobs held, want 21: from the Rate-th on", held)
	}
	if n := waitQueued(q, held); n != held {
		t.Errorf("%d woken a Window after the last job, want the %d held", n, held)
	}
	for i := 100; i < 100+Rate-1; i++ {
		if arrive(i) {
			t.Errorf("job %d held: %d jobs a Window apart after a quiet Window make no burst", i, Rate-1)
		}
		clk.Step(Window)
	}
}

// No job waits longer than MaxHold (the duration Hold returns is when to look again for that),
// and a burst lasts MaxHold at most: jobs that keep coming after it, slower than a burst starts,
// are a stream and wait no more.
func TestNoJobWaitsLongerThanMaxHold(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	g := New(2*time.Second, clk)
	wakes, q := queued(t)
	arrive := func(i int) time.Duration {
		j := job("ns", i)
		g.Arrived(j.GetNamespace(), j.GetUID())
		return g.Hold(j, wakes)
	}
	for i := range 500 { // 10 ms apart, for 5 s
		if got := arrive(i); i == 20 && got != 2*time.Second {
			t.Errorf("held job: look again in %v, want its MaxHold, 2s", got)
		}
		clk.Step(10 * time.Millisecond)
	}
	if got := g.Hold(job("ns", 20), wakes); got != 0 {
		t.Errorf("job 20, arrived 4.8 s ago, held %v more; want 0 past MaxHold", got)
	}
	if got := g.Hold(job("ns", 499), wakes); got <= 0 {
		t.Error("the newest job is not held while jobs keep coming at 100 a second")
	}
	clk.Step(3 * time.Second / 2) // quiet: every burst is over
	waitQueued(q, 1)              // and its check has run
	var held []int
	for i := 1000; i < 1000+Rate; i++ { // a burst starts
		if arrive(i) > 0 {
			held = append(held, i)
		}
		clk.Step(10 * time.Millisecond)
	}
	for i := 1000 + Rate; i < 1000+Rate+12; i++ { // then 3 a second, for 4 s
		clk.Step(333*time.Millisecond - 10*time.Millisecond)
		if arrive(i) > 0 {
			held = append(held, i)
		}
		clk.Step(10 * time.Millisecond)
	}
	// The burst started at the Rate-th and lasted MaxHold: it and the 6 after it in its 2 s
	// waited, the 6 after those do not.
	var want []int
	for i := 1000 + Rate - 1; i <= 1000+Rate+5; i++ {
		want = append(want, i)
	}
	if !slices.Equal(held, want) {
		t.Errorf("held %v, want %v", held, want)
	}
}

// A job held again and again (each of its reconciles asks) is queued once; one whose MaxHold ran
// out is not woken at all. Job 0 arrives 100 ms before the others start the burst, so its
// MaxHold runs out before the burst's (which would wake it with the rest).
func TestEachHeldJobIsWokenOnce(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	g := New(500*time.Millisecond, clk)
	wakes, q := queued(t)
	g.Arrived("ns", job("ns", 0).GetUID())
	clk.Step(100 * time.Millisecond)
	for i := 1; i < 20; i++ {
		g.Arrived("ns", job("ns", i).GetUID())
	}
	for range 5 {
		g.Hold(job("ns", 19), wakes)
	}
	g.Hold(job("ns", 0), wakes)
	clk.Step(400 * time.Millisecond)
	if got := g.Hold(job("ns", 0), wakes); got != 0 {
		t.Fatalf("held %v past MaxHold", got)
	}
	clk.Step(500 * time.Millisecond)
	if n := waitQueued(q, 1); n != 1 {
		t.Fatalf("%d queued, want job 19 once", n)
	}
	if key, _ := q.Get(); key.Name != "job-19" {
		t.Errorf("queued %v, want job-19", key)
	}
}

// Jobs kiln did not see arrive (found at its start), a nil Gate and one with no MaxHold hold nothing.
func TestNothingHeldWithoutArrivals(t *testing.T) {
	var none *Gate
	none.Arrived("ns", job("ns", 1).GetUID())
	if none.Hold(job("ns", 1), nil) != 0 {
		t.Error("a nil Gate held a job")
	}
	clk := testingclock.NewFakeClock(t0)
	off := New(0, clk)
	for i := range 50 {
		off.Arrived("ns", job("ns", i).GetUID())
	}
	if off.Hold(job("ns", 49), nil) != 0 {
		t.Error("a Gate with no MaxHold held a job")
	}
	g := New(time.Minute, clk)
	for i := range 50 {
		g.Arrived("ns", job("ns", i).GetUID())
	}
	if g.Hold(job("ns", 1000), nil) != 0 {
		t.Error("a job that did not arrive was held")
	}
}

// The Gate forgets what it no longer needs: jobs past MaxHold, namespaces quiet for a Window.
func TestTheGateForgets(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	g := New(time.Second, clk)
	for i := range 100 {
		ns := fmt.Sprintf("ns-%d", i)
		g.Arrived(ns, job(ns, i).GetUID())
	}
	clk.Step(time.Minute)
	g.Arrived("ns-x", "x")
	if len(g.jobs) != 1 || len(g.namespaces) != 1 {
		t.Errorf("after a minute it keeps %d jobs and %d namespaces, want 1 and 1", len(g.jobs), len(g.namespaces))
	}
	if got := g.Hold(job("ns-3", 3), nil); got != 0 {
		t.Errorf("a forgotten job held %v", got)
	}
}

// Each of a job's controllers tells the Gate of its arrival (whichever hears of it first): the
// job counts once towards a burst.
func TestAJobCountsOnce(t *testing.T) {
	g := New(30*time.Second, testingclock.NewFakeClock(t0))
	for i := range Rate - 1 {
		g.Arrived("ns", job("ns", i).GetUID())
		g.Arrived("ns", job("ns", i).GetUID())
	}
	if got := g.Hold(job("ns", Rate-2), nil); got != 0 {
		t.Errorf("%d jobs, each told of twice, held a job %v: counted as a burst", Rate-1, got)
	}
}

// twoHolding is a Gate holding job j, which arrived in a burst, for two of its controllers:
// the one that makes its pods and the one that writes its Created, each with its queue.
type twoHolding struct {
	clk                    *testingclock.FakeClock
	g                      *Gate
	j                      client.Object
	pods, created          *Wakes
	podQueue, createdQueue workqueue.TypedRateLimitingInterface[reconcile.Request]
}

func holdForTwo(t *testing.T) *twoHolding {
	t.Helper()
	h := &twoHolding{clk: testingclock.NewFakeClock(t0), j: job("ns", Rate-1)}
	h.g = New(30*time.Second, h.clk)
	h.pods, h.podQueue = queued(t)
	h.created, h.createdQueue = queued(t)
	for i := range Rate {
		h.g.Arrived("ns", job("ns", i).GetUID())
	}
	if h.g.Hold(h.j, h.pods) == 0 || h.g.Hold(h.j, h.created) == 0 {
		t.Fatal("a job of a burst is not held")
	}
	return h
}

// A job held by two of its controllers, each asking again and again, is woken once in each
// one's queue when the burst ends, and then held by neither.
func TestEachControllerOfAHeldJobIsWoken(t *testing.T) {
	h := holdForTwo(t)
	for range 3 {
		if h.g.Hold(h.j, h.pods) == 0 || h.g.Hold(h.j, h.created) == 0 {
			t.Fatal("a job of a burst is not held")
		}
	}
	h.clk.Step(Window)
	if n := waitQueued(h.podQueue, 1); n != 1 {
		t.Errorf("the pods' controller queued %d, want the job once", n)
	}
	if n := waitQueued(h.createdQueue, 1); n != 1 {
		t.Errorf("the Created writer queued %d, want the job once", n)
	}
	if h.g.Hold(h.j, h.pods) != 0 || h.g.Hold(h.j, h.created) != 0 {
		t.Error("held once the burst ended")
	}
}

// One controller goes on with a job before the other hears of it (their informers' handlers run
// apart): the late one neither counts it again towards a burst nor holds it.
func TestAJobLetGoIsNotHeldByAControllerThatHearsOfItLate(t *testing.T) {
	g := New(30*time.Second, testingclock.NewFakeClock(t0))
	for i := range Rate - 2 {
		j := job("ns", i)
		g.Arrived("ns", j.GetUID())
		if got := g.Hold(j, nil); got != 0 {
			t.Fatalf("job %d of %d held %v", i, Rate-2, got)
		}
		g.Arrived("ns", j.GetUID()) // the other controller's predicate, late
	}
	next := job("ns", Rate)
	g.Arrived("ns", next.GetUID())
	if got := g.Hold(next, nil); got != 0 {
		t.Errorf("the %d-th job held %v: the jobs let go were counted again", Rate-1, got)
	}
}

// A job held by two controllers, one of which looks again (its own requeue) just as the burst
// ends, before the Gate's check has run: the other is still woken, and the job is counted in
// kiln_burst_hold_seconds once.
func TestOneControllerGoingOnDoesNotDropTheOthersWake(t *testing.T) {
	h := holdForTwo(t)
	before := heldCount()
	h.clk.SetTime(t0.Add(Window)) // the burst ends; the check runs on a goroutine of its own
	if got := h.g.Hold(h.j, h.pods); got != 0 {
		t.Fatalf("held %v once the burst ended", got)
	}
	if n := waitQueued(h.createdQueue, 1); n != 1 {
		t.Errorf("the Created writer queued %d, want the job once", n)
	}
	if got := h.g.Hold(h.j, h.created); got != 0 {
		t.Errorf("the Created writer held %v once the burst ended", got)
	}
	if n := waitQueued(h.podQueue, 0); n > 1 {
		t.Errorf("the pods' controller queued %d", n)
	}
	if got := heldCount() - before; got != 1 {
		t.Errorf("kiln_burst_hold_seconds counted the job %d times, want once", got)
	}
}

// heldCount is how many jobs kiln_burst_hold_seconds has counted in this process.
func heldCount() uint64 {
	var m dto.Metric
	_ = metrics.BurstHold.Write(&m)
	return m.GetHistogram().GetSampleCount()
}
