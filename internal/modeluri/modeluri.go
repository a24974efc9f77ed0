// Package modeluri holds what the manager and kiln-fetch both say about a model URI: its form with
// no secret in it.
package modeluri

import (
	"net/url"
	"strings"
)

// Redact is uri without its query string, fragment and user info (a pre-signed URL's
// signature, a SAS token, a password): what may appear in pod specs, annotations, statuses,
// events, errors and logs. A URI that does not parse is cut the same way by hand: at the first
// '?' or '#', and then everything between "://" and the last '@' goes (a password may hold a
// '/', so the last '@' anywhere, not only before the path).
func Redact(uri string) string {
	if u, err := url.Parse(uri); err == nil {
		u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment, u.User = "", false, "", "", nil
		return u.String()
	}
	if i := strings.IndexAny(uri, "?#"); i >= 0 {
		uri = uri[:i]
	}
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok {
		if i := strings.LastIndex(uri, "@"); i >= 0 {
			return uri[i+1:]
		}
		return uri
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		rest = rest[i+1:]
	}
	return scheme + "://" + rest
}
