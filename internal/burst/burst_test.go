package burst

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func uid(i int) types.UID { return types.UID(fmt.Sprintf("job-%d", i)) }

// A script submitting a job every 10 ms: the first Rate-1 arrive before any burst and are not
// held; from the Rate-th on, a job's pods wait, and every waiting job is woken once the
// submissions stop for long enough.
func TestAJobWaitsForTheBurstItArrivedIn(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	g := New(30*time.Second, clk)
	var woken atomic.Int32
	wake := func() { woken.Add(1) }
	for i := range 100 {
		g.Arrived("team-a", uid(i))
		held := g.Hold(uid(i), wake) > 0
		if i < Rate-1 && held {
			t.Errorf("job %d of the first %d held", i, Rate-1)
		}
		if i >= Rate-1 && !held {
			t.Errorf("job %d: not held in a burst", i)
		}
		clk.Step(10 * time.Millisecond)
	}
	// A lone job of another namespace is not held by team-a's burst.
	g.Arrived("team-b", "lone")
	if got := g.Hold("lone", wake); got != 0 {
		t.Errorf("a lone job of another namespace held %v", got)
	}
	// The 100th arrived at 990 ms; the burst ends once the 10th newest (at 900 ms) is a Window
	// old, at 1.9 s. Nobody is woken before.
	clk.SetTime(t0.Add(1900*time.Millisecond - time.Millisecond))
	if n := woken.Load(); n != 0 {
		t.Fatalf("%d woken before the burst ended", n)
	}
	clk.SetTime(t0.Add(1900 * time.Millisecond))
	for deadline := time.Now().Add(5 * time.Second); woken.Load() < 100-(Rate-1) && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := woken.Load(); n != 100-(Rate-1) {
		t.Errorf("%d woken at the burst's end, want the %d held", n, 100-(Rate-1))
	}
	if got := g.Hold(uid(50), wake); got != 0 {
		t.Errorf("held %v once the burst ended, want 0", got)
	}
}

// A burst that goes on: the wake-up waits for it, and no job waits longer than MaxHold (the
// duration Hold returns is when to look again for that).
func TestNoJobWaitsLongerThanMaxHold(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	g := New(2*time.Second, clk)
	var woken atomic.Int32
	for i := range 500 {
		g.Arrived("ns", uid(i))
		if i == 20 {
			if got := g.Hold(uid(i), func() { woken.Add(1) }); got != 2*time.Second {
				t.Errorf("held job: look again in %v, want its MaxHold, 2s", got)
			}
		}
		clk.Step(10 * time.Millisecond)
	}
	if n := woken.Load(); n != 0 {
		t.Errorf("woken while the burst went on")
	}
	if got := g.Hold(uid(20), func() {}); got != 0 {
		t.Errorf("job 20, arrived %v ago, held %v more; want 0 past MaxHold", clk.Since(t0.Add(200*time.Millisecond)), got)
	}
	if got := g.Hold(uid(499), func() {}); got <= 0 {
		t.Error("the newest job is not held while the burst goes on")
	}
}

// Jobs kiln did not see arrive (found at its start), a nil Gate and one with no MaxHold hold nothing.
func TestNothingHeldWithoutArrivals(t *testing.T) {
	var none *Gate
	none.Arrived("ns", uid(1))
	if none.Hold(uid(1), nil) != 0 {
		t.Error("a nil Gate held a job")
	}
	clk := testingclock.NewFakeClock(t0)
	off := New(0, clk)
	for i := range 50 {
		off.Arrived("ns", uid(i))
	}
	if off.Hold(uid(49), nil) != 0 {
		t.Error("a Gate with no MaxHold held a job")
	}
	g := New(time.Minute, clk)
	for i := range 50 {
		g.Arrived("ns", uid(i))
	}
	if g.Hold("found-at-start", nil) != 0 {
		t.Error("a job that did not arrive was held")
	}
}

// The Gate forgets what it no longer needs: jobs past MaxHold, namespaces quiet for a Window.
func TestTheGateForgets(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	g := New(time.Second, clk)
	for i := range 100 {
		g.Arrived(fmt.Sprintf("ns-%d", i), uid(i))
	}
	clk.Step(time.Minute)
	g.Arrived("ns-x", "x")
	if len(g.jobs) != 1 || len(g.namespaces) != 1 {
		t.Errorf("after a minute it keeps %d jobs and %d namespaces, want 1 and 1", len(g.jobs), len(g.namespaces))
	}
	if got := g.Hold(uid(3), nil); got != 0 {
		t.Errorf("a forgotten job held %v", got)
	}
}

// A job held again and again (each of its reconciles asks) is woken once; one whose MaxHold ran
// out is not woken at all.
func TestEachHeldJobIsWokenOnce(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	g := New(500*time.Millisecond, clk)
	var woken, expired atomic.Int32
	for i := range 20 {
		g.Arrived("ns", uid(i))
	}
	for range 5 {
		g.Hold(uid(19), func() { woken.Add(1) })
	}
	g.Hold(uid(0), func() { expired.Add(1) })
	clk.Step(500 * time.Millisecond)
	if got := g.Hold(uid(0), nil); got != 0 {
		t.Fatalf("held %v past MaxHold", got)
	}
	clk.Step(500 * time.Millisecond)
	for deadline := time.Now().Add(5 * time.Second); woken.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond)
	if w, e := woken.Load(), expired.Load(); w != 1 || e != 0 {
		t.Errorf("woken %d times (want 1), the expired job %d (want 0)", w, e)
	}
}
