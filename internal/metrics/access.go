package metrics

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kiln-ml/kiln/internal/accessreview"
)

// Access is the metrics server's filter when metrics are served securely: a caller needs a
// bearer token the apiserver authenticates (a TokenReview) and that may use the verb of its
// request on the path it asks for (a SubjectAccessReview of the non-resource URL, e.g. get
// /metrics). Anything else gets 401 or 403.
//
// It does what controller-runtime's filters.WithAuthenticationAndAuthorization does, with the
// clients kiln links anyway: that filter brings in the apiserver's authentication and
// authorization libraries (CEL and the konnectivity client among them), about 8 MB of
// program that every kiln process maps into memory (docs/decisions.md, 18).
//
// Answers are remembered per token, verb and path: allowed for a minute, refused for ten
// seconds, so a scrape every few seconds costs the apiserver two reviews a minute.
func Access(cfg *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
	authn, err := authenticationclient.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("building the TokenReview client of the metrics server: %w", err)
	}
	authz, err := authorizationclient.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("building the SubjectAccessReview client of the metrics server: %w", err)
	}
	v := reviewer{authn: authn.TokenReviews(), authz: authz.SubjectAccessReviews()}
	g := newGate(v.review, time.Now)
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			code, why := g.decide(r)
			if code != http.StatusOK {
				if code == http.StatusInternalServerError {
					// The caller is not known yet: the apiserver's error goes to kiln's log only.
					log.Error(fmt.Errorf("%s", why), "Checking a metrics caller's access failed")
					why = "Internal error: kiln could not check this caller's access; its log says why"
				}
				http.Error(w, why, code)
				return
			}
			next.ServeHTTP(w, r)
		}), nil
	}, nil
}

// How long an answer is remembered, and how many are at most.
const (
	allowedFor = time.Minute
	refusedFor = 10 * time.Second
	maxAnswers = 1024
)

type answerKey struct {
	token      [sha256.Size]byte
	verb, path string
}

type answer struct {
	code    int
	why     string
	expires time.Time
}

// gate remembers the answers of review: a status code, and why when it is not 200.
type gate struct {
	review  func(ctx context.Context, token, verb, path string) (int, string)
	now     func() time.Time
	mu      sync.Mutex
	answers map[answerKey]answer
}

func newGate(review func(ctx context.Context, token, verb, path string) (int, string), now func() time.Time) *gate {
	return &gate{review: review, now: now, answers: map[answerKey]answer{}}
}

func (g *gate) decide(r *http.Request) (int, string) {
	token, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		return http.StatusUnauthorized, "Unauthorized: send a bearer token (Authorization: Bearer <token>)"
	}
	key := answerKey{token: sha256.Sum256([]byte(token)), verb: verbOf(r.Method), path: r.URL.Path}
	now := g.now()
	g.mu.Lock()
	a, known := g.answers[key]
	g.mu.Unlock()
	if known && now.Before(a.expires) {
		return a.code, a.why
	}
	code, why := g.review(r.Context(), token, key.verb, key.path)
	if code == http.StatusInternalServerError {
		return code, why // not remembered: the next request asks again
	}
	a = answer{code: code, why: why, expires: now.Add(refusedFor)}
	if code == http.StatusOK {
		a.expires = now.Add(allowedFor)
	}
	g.mu.Lock()
	if len(g.answers) >= maxAnswers {
		clear(g.answers)
	}
	g.answers[key] = a
	g.mu.Unlock()
	return code, why
}

// reviewer asks the apiserver who a token is and what it may do.
type reviewer struct {
	authn authenticationclient.TokenReviewInterface
	authz authorizationclient.SubjectAccessReviewInterface
}

func (v reviewer) review(ctx context.Context, token, verb, path string) (int, string) {
	tr, err := v.authn.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return http.StatusInternalServerError, fmt.Sprintf("Internal error: reviewing the token: %v", err)
	}
	if !tr.Status.Authenticated {
		return http.StatusUnauthorized, "Unauthorized: the apiserver does not accept this token"
	}
	u := tr.Status.User
	sar := accessreview.Of(u)
	sar.Spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: path, Verb: verb}
	sar, err = v.authz.Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return http.StatusInternalServerError, fmt.Sprintf("Internal error: reviewing the access: %v", err)
	}
	if !sar.Status.Allowed {
		return http.StatusForbidden, fmt.Sprintf("Forbidden: %s may not %s %s (grant it the non-resource URL in a ClusterRole)", u.Username, verb, path)
	}
	return http.StatusOK, ""
}

// bearer is the token of an "Authorization: Bearer <token>" header.
func bearer(header string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	token = strings.TrimSpace(token)
	return token, ok && strings.EqualFold(scheme, "bearer") && token != ""
}

// verbOf is the verb an HTTP method asks of a non-resource URL, as the apiserver names it.
func verbOf(method string) string {
	if method == http.MethodHead {
		return "get"
	}
	return strings.ToLower(method)
}
