// Package modeluri holds what the manager and kiln-fetch both say about a model URI: its form with
// no secret in it.
package modeluri

import (
	"net/url"
	"regexp"
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

// aURL is a URL in free text: a scheme, "://", and everything up to a space or a quote.
var aURL = regexp.MustCompile("[A-Za-z][A-Za-z0-9+.-]*://[^\\s\"'`<>]+")

// RedactText is text (an error, a log line, a container's termination message) with every URL in
// it redacted, and uri, the model URI the text may quote as given, wherever it appears whole: Go's
// errors quote URLs as they were given (url.Parse), with the password masked (net/http) or as
// redirected to, so no one form of uri can be replaced alone.
func RedactText(text, uri string) string {
	if uri != "" {
		text = strings.ReplaceAll(text, uri, Redact(uri))
	}
	return aURL.ReplaceAllStringFunc(text, Redact)
}
