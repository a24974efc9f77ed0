package version

import (
	"strings"
	"testing"
)

func TestStampedVersionNamesTheImage(t *testing.T) {
	defer func(v, c string) { Version, Commit = v, c }(Version, Commit)
	Version, Commit = "v1.4.0-2-gabcdef0", "abcdef0123"
	if got, want := Image(), "ghcr.io/kiln-ml/kiln:v1.4.0-2-gabcdef0"; got != want {
		t.Errorf("Image() = %s, want %s", got, want)
	}
	out := String()
	for _, want := range []string{"kiln v1.4.0-2-gabcdef0", "commit:     abcdef0123", "go:         go1.", "kubernetes: ", "image:      ghcr.io/kiln-ml/kiln:v1.4.0-2-gabcdef0"} {
		if !strings.Contains(out, want) {
			t.Errorf("version output lacks %q:\n%s", want, out)
		}
	}
}

func TestUnstampedBuildsNeverSayLatest(t *testing.T) {
	defer func(v string) { Version = v }(Version)
	Version = ""
	if got := Get(); got == "" || got == "latest" || !validTag(got) {
		t.Errorf("unstamped version %q is not a usable, pinned tag", got)
	}
}

func TestValidTag(t *testing.T) {
	for v, want := range map[string]bool{
		"v0.1.0": true, "v0.1.0-dev-g9884ca7-dirty": true, "v0.0.0-20261130070417-9884ca793b9f": true,
		"": false, "(devel)": false, "v0.0.0-20261130070417-9884ca793b9f+dirty": false, strings.Repeat("a", 129): false,
	} {
		if got := validTag(v); got != want {
			t.Errorf("validTag(%q) = %v, want %v", v, got, want)
		}
	}
}
