// Package accessreview builds the SubjectAccessReviews kiln asks the apiserver: who asks (a
// user as the apiserver authenticated them), with the question set by the caller.
package accessreview

import (
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
)

// Of is the review of what user may do, without the question: set ResourceAttributes or
// NonResourceAttributes.
func Of(user authenticationv1.UserInfo) *authorizationv1.SubjectAccessReview {
	extra := make(map[string]authorizationv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	return &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
	}}
}
