package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestBearer(t *testing.T) {
	for header, want := range map[string]string{"Bearer abc": "abc", "bearer  abc ": "abc", " Bearer abc": "abc"} {
		if got, ok := bearer(header); !ok || got != want {
			t.Errorf("bearer(%q) = %q, %v; want %q", header, got, ok, want)
		}
	}
	for _, header := range []string{"", "Bearer", "Bearer ", "Basic abc", "abc"} {
		if got, ok := bearer(header); ok {
			t.Errorf("bearer(%q) = %q, want no token", header, got)
		}
	}
}

// The gate asks once per token, verb and path while an answer holds (a minute when allowed, ten
// seconds when refused), asks again after, and never remembers an error.
func TestGateRemembersAnswers(t *testing.T) {
	now := time.Unix(1000, 0)
	asked := 0
	codes := map[string]int{"good": http.StatusOK, "bad": http.StatusForbidden, "broken": http.StatusInternalServerError}
	g := newGate(func(_ context.Context, token, verb, path string) (int, string) {
		asked++
		if verb != "get" || path != "/metrics" {
			t.Errorf("reviewed %s %s, want get /metrics", verb, path)
		}
		return codes[token], token
	}, func() time.Time { return now })
	req := func(token, method string) int {
		r := httptest.NewRequest(method, "/metrics", nil)
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		code, _ := g.decide(r)
		return code
	}
	steps := []struct {
		token, method string
		after         time.Duration
		code, asked   int
	}{
		{"", http.MethodGet, 0, http.StatusUnauthorized, 0}, // no token: nothing to ask
		{"good", http.MethodGet, 0, http.StatusOK, 1},
		{"good", http.MethodHead, 59 * time.Second, http.StatusOK, 1}, // HEAD is get; remembered
		{"good", http.MethodGet, 2 * time.Second, http.StatusOK, 2},   // a minute on: asked again
		{"bad", http.MethodGet, 0, http.StatusForbidden, 3},
		{"bad", http.MethodGet, 9 * time.Second, http.StatusForbidden, 3},
		{"bad", http.MethodGet, 2 * time.Second, http.StatusForbidden, 4},
		{"broken", http.MethodGet, 0, http.StatusInternalServerError, 5},
		{"broken", http.MethodGet, 0, http.StatusInternalServerError, 6},
	}
	for i, s := range steps {
		now = now.Add(s.after)
		if code := req(s.token, s.method); code != s.code || asked != s.asked {
			t.Errorf("step %d (%q): %d after %d reviews, want %d after %d", i, s.token, code, asked, s.code, s.asked)
		}
	}
}
