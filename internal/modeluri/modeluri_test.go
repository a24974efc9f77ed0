package modeluri

import (
	"strings"
	"testing"
)

func TestRedactLeavesNoSecret(t *testing.T) {
	for uri, want := range map[string]string{
		"https://u:p@h/x?X-Amz-Signature=abc":                       "https://h/x",
		"https://u:p@ss@h/x?sig=abc":                                "https://h/x",
		"https://u:%zz@h/x?sig=abc":                                 "https://h/x", // does not parse
		"https://u:p/q@h/x?sig=abc":                                 "https://h/x", // does not parse either
		"https://u:p@[::1/x?sig=abc":                                "https://[::1/x",
		"https://h/x#sig=abc":                                       "https://h/x",
		"https://h/x?":                                              "https://h/x",
		"s3://bucket/model":                                         "s3://bucket/model",
		"https://acct.blob.core.windows.net/c/m?sv=2024&sig=secret": "https://acct.blob.core.windows.net/c/m",
		"pvc://claim/models/iris":                                   "pvc://claim/models/iris",
	} {
		got := Redact(uri)
		if got != want {
			t.Errorf("Redact(%q) = %q, want %q", uri, got, want)
		}
		for _, secret := range []string{"sig", "Signature", ":p", "%zz", "secret"} {
			if strings.Contains(got, secret) {
				t.Errorf("Redact(%q) = %q keeps %q", uri, got, secret)
			}
		}
	}
}

// Go's errors quote a URL in several forms: as given (url.Parse), with the password masked
// (net/http), or redirected elsewhere. None keeps a secret.
func TestRedactTextLeavesNoSecret(t *testing.T) {
	uri := "https://u:p@127.0.0.1:9/m.tar.gz?X-Amz-Signature=SECRET"
	for _, text := range []string{
		`Get "https://u:***@127.0.0.1:9/m.tar.gz?X-Amz-Signature=SECRET": dial tcp 127.0.0.1:9: connect: connection refused`,
		`model URI https://h/x: parse "https://u:p/q@h/x?X-Amz-Signature=SECRET": invalid port ":p" after host`,
		`Get "https://cdn.example/blob?sig=SECRET&se=2026": EOF`,
		"fetching " + uri + ": unexpected EOF",
	} {
		got := RedactText(text, uri)
		for _, secret := range []string{"SECRET", ":p@", "u:***", ":p/q"} {
			if strings.Contains(got, secret) {
				t.Errorf("RedactText(%q) = %q keeps %q", text, got, secret)
			}
		}
	}
	if got := RedactText("connection refused", ""); got != "connection refused" {
		t.Errorf("text without a URL changed: %q", got)
	}
}
