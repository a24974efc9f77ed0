#!/usr/bin/env bash
# Regenerates deepcopy code, CRDs, RBAC, webhook configurations and the chart's copies of them, and fails when that changed anything (the checked-in
# files were stale), when a generated file is not tracked by git, when a binary or a file over 1 MiB is
# tracked, or when Go code is not gofmt'ed.
set -euo pipefail
cd "$(dirname "$0")/.."
generated() { git ls-files --cached --others --exclude-standard -- 'api/**/zz_generated.*.go' config/crd config/rbac config/webhook charts/kiln/crds charts/kiln/files; }
fingerprint() { generated | sort | xargs sha256sum; }

before=$(fingerprint)
make --no-print-directory generate
after=$(fingerprint)
if [ "$before" != "$after" ]; then
	echo "generated files were stale; 'make generate' changed:" >&2
	diff <(echo "$before") <(echo "$after") | grep '^[<>]' | awk '{print "  " $3}' | sort -u >&2
	echo "commit the regenerated files." >&2
	exit 1
fi
untracked=$(git ls-files --others --exclude-standard -- 'api/**/zz_generated.*.go' config/crd config/rbac config/webhook charts/kiln/crds charts/kiln/files)
if [ -n "$untracked" ]; then
	echo "generated files not tracked by git (git add them):" >&2
	echo "$untracked" >&2
	exit 1
fi
# Build outputs never belong in git: a binary or a large file makes every clone pay for it.
built=$(git ls-files -z | perl -0ne 'chomp; next unless -f; open(my $f, "<", $_) or next; read($f, my $head, 4); close $f;
	if ($head eq "\x7fELF") { print "  $_ (an ELF binary)\n" } elsif (-s _ > 1048576) { printf "  %s (%d bytes, over 1 MiB)\n", $_, -s _ }')
if [ -n "$built" ]; then
	echo "build outputs or large files are tracked by git ('git rm --cached' them; .gitignore lists build outputs):" >&2
	echo "$built" >&2
	exit 1
fi
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then
	echo "not gofmt'ed (run 'gofmt -w' on them):" >&2
	echo "$unformatted" >&2
	exit 1
fi
echo "verify: generated files are up to date and tracked; no binaries or large files tracked; Go code is gofmt'ed"
