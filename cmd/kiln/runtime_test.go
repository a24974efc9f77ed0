package main

import (
	"runtime"
	"runtime/debug"
	"testing"
)

// The manager samples allocations for a heap profile only when it serves one, or when GODEBUG
// sets the rate; GOGC and GOMAXPROCS from the environment stay as they are.
func TestTuneRuntime(t *testing.T) {
	rate, procs, gc := runtime.MemProfileRate, runtime.GOMAXPROCS(0), debug.SetGCPercent(100)
	t.Cleanup(func() {
		runtime.MemProfileRate = rate
		runtime.GOMAXPROCS(procs)
		debug.SetGCPercent(gc)
	})
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	for _, tc := range []struct {
		name     string
		env      map[string]string
		profiled bool
		sampled  bool
	}{
		{name: "no profile served", sampled: false},
		{name: "--pprof-bind-address", profiled: true, sampled: true},
		{name: "GODEBUG sets the rate", env: map[string]string{"GODEBUG": "gctrace=0,memprofilerate=4096"}, sampled: true},
		{name: "GODEBUG without the rate", env: map[string]string{"GODEBUG": "gctrace=0"}, sampled: false},
	} {
		runtime.MemProfileRate = 512 * 1024
		tuneRuntime(env(tc.env), tc.profiled)
		if got := runtime.MemProfileRate != 0; got != tc.sampled {
			t.Errorf("%s: allocations sampled = %v (MemProfileRate %d), want %v", tc.name, got, runtime.MemProfileRate, tc.sampled)
		}
	}

	for addr, want := range map[string]bool{"": false, "0": false, ":6060": true, "127.0.0.1:6060": true} {
		if got := servesProfiles(addr); got != want {
			t.Errorf("--pprof-bind-address %q serves profiles: %v, want %v", addr, got, want)
		}
	}

	runtime.GOMAXPROCS(2)
	debug.SetGCPercent(100)
	tuneRuntime(env(map[string]string{"GOGC": "100", "GOMAXPROCS": "2"}), false)
	if p, g := runtime.GOMAXPROCS(0), debug.SetGCPercent(100); p != 2 || g != 100 {
		t.Errorf("with GOGC=100 GOMAXPROCS=2 set: GOMAXPROCS %d, GOGC %d; want them left at 2 and 100", p, g)
	}
	tuneRuntime(env(nil), false)
	if p, g := runtime.GOMAXPROCS(0), debug.SetGCPercent(100); p != 1 || g != 50 {
		t.Errorf("with nothing set: GOMAXPROCS %d, GOGC %d; want 1 and 50", p, g)
	}
}
