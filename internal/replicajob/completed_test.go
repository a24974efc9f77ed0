package replicajob

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestIndexSetsReadAndWriteTheBatchJobsForm(t *testing.T) {
	for _, c := range []struct {
		in    string
		limit int
		want  string
	}{
		{"", 10, ""},
		{"0", 10, "0"},
		{"0,1", 10, "0,1"},
		{"0-2,4,6-9", 10, "0-2,4,6-9"},
		{"0,1,2,3", 10, "0-3"},
		{"3-5,x,7-", 10, "3-5"}, // what does not parse is skipped
		{"0-9", 4, "0-3"},       // scaled down: nothing past the replicas
	} {
		if got := parseIndexes(c.in, c.limit).String(); got != c.want {
			t.Errorf("parseIndexes(%q, %d) = %q, want %q", c.in, c.limit, got, c.want)
		}
	}
	if diff := cmp.Diff(indexSet{1: true, 2: true, 5: true}, parseIndexes("1,2,5", 6)); diff != "" {
		t.Errorf("set (-want +got):\n%s", diff)
	}
}

func FuzzIndexSetRoundTrips(f *testing.F) {
	f.Add("0-2,4")
	f.Fuzz(func(t *testing.T, s string) {
		once := parseIndexes(s, 1000).String()
		if twice := parseIndexes(once, 1000).String(); twice != once {
			t.Errorf("%q → %q → %q", s, once, twice)
		}
	})
}
