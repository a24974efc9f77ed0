package main

import "testing"

func TestReflow(t *testing.T) {
	in := "BackoffLimit is the number of retries before the job is marked Failed. Every\npod kiln recreates counts.\n\nA second paragraph\nstays apart."
	want := "BackoffLimit is the number of retries before the job is marked Failed. Every pod kiln recreates counts.\n\nA second paragraph stays apart."
	if got := Reflow(in); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
