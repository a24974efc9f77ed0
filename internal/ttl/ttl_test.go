package ttl

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestLeft(t *testing.T) {
	done := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, c := range []struct {
		name       string
		seconds    *int32
		completion *metav1.Time
		now        time.Time
		left       time.Duration
		has        bool
	}{
		{"no TTL", nil, &done, done.Add(time.Hour), 0, false},
		{"not finished", ptr.To[int32](10), nil, done.Time, 0, false},
		{"running out", ptr.To[int32](10), &done, done.Add(4 * time.Second), 6 * time.Second, true},
		{"ran out", ptr.To[int32](10), &done, done.Add(time.Minute), 0, true},
		{"zero", ptr.To[int32](0), &done, done.Time, 0, true},
	} {
		left, has := Left(c.seconds, c.completion, c.now)
		if left != c.left || has != c.has {
			t.Errorf("%s: Left = %v, %v; want %v, %v", c.name, left, has, c.left, c.has)
		}
	}
}
