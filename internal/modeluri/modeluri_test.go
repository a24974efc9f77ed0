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
