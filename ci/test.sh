#!/usr/bin/env bash
# The project's single test command. It builds the local PostgreSQL images
# when they are missing (ci/build-images.sh), installs PgBouncer and Chromium
# when they are missing (Debian's packages, as root), then checks formatting and that
# go.mod and go.sum are tidy, runs go vet and staticcheck, and runs every
# test with the race detector against PostgreSQL 15 and 17. Extra arguments
# go to `go test`, for example:
#
#   ci/test.sh -run TestLock -v
#
# Environment:
#   PGADVISORY_TEST_IMAGES  images to test on (default: the two local images)
#   PGADVISORY_TEST_DSN     existing servers instead of containers; no build
#   CI=true                 a missing database fails the run, never skips;
#                           so do a staticcheck and a PgBouncer that cannot
#                           be installed
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

step() { printf '\n== %s\n' "$*"; }
# The same rule as pgtest: CI is on unless unset, "", 0, false or no.
under_ci() {
	case "$(printf '%s' "${CI:-}" | tr '[:upper:]' '[:lower:]')" in
	"" | 0 | false | no) return 1 ;;
	esac
	return 0
}
phase_start=$SECONDS
phase_done() { echo "($1 took $((SECONDS - phase_start))s)"; phase_start=$SECONDS; }

command -v go >/dev/null 2>&1 || {
	echo "test: error: go is not on PATH" >&2
	exit 1
}

# staticcheck is built from the module proxy while the images build: both
# take minutes on a fresh machine, and neither needs the other.
staticcheck_version=v0.8.2
gobin="$(go env GOBIN)"
[[ -n $gobin ]] || gobin="$(go env GOPATH | cut -d: -f1)/bin"
staticcheck="$gobin/staticcheck"
pinned_staticcheck() { "$staticcheck" -version 2>/dev/null | grep -qF "(${staticcheck_version#v})"; }
staticcheck_log="$(mktemp -t pgadvisory-staticcheck.XXXXXX)"
staticcheck_pid=""
if ! pinned_staticcheck; then
	go install "honnef.co/go/tools/cmd/staticcheck@$staticcheck_version" >"$staticcheck_log" 2>&1 &
	staticcheck_pid=$!
fi

if [[ -n ${PGADVISORY_TEST_DSN:-} ]]; then
	step "using the servers of PGADVISORY_TEST_DSN; no images needed"
else
	step "images"
	if ! ./ci/build-images.sh; then
		if under_ci; then
			echo "test: error: building the PostgreSQL images failed" >&2
			exit 1
		fi
		echo "test: warning: building the PostgreSQL images failed; the tests will use whatever PostgreSQL they find" >&2
	fi
	export PGADVISORY_TEST_IMAGES="${PGADVISORY_TEST_IMAGES:-pgadvisory/postgres:15,pgadvisory/postgres:17}"
	echo "PGADVISORY_TEST_IMAGES=$PGADVISORY_TEST_IMAGES"
fi

phase_done images

step "debian packages"
# Two tools the tests start themselves, through the harness, from Debian's
# packages: PgBouncer (pgtest runs it in transaction mode, with a
# configuration of its own on a free port, for the tests that need a
# pooler; the package's own service is not used) and Chromium (headless,
# for the test of the lock-state page that pgadvisory serve draws). As root,
# missing ones are installed with apt-get. Under CI=true a tool that cannot
# be had fails the run, as the tests that need it would.
have_pgbouncer() {
	command -v pgbouncer >/dev/null 2>&1 || [[ -x /usr/sbin/pgbouncer ]] || [[ -n ${PGADVISORY_TEST_PGBOUNCER:-} ]]
}
have_chromium() {
	command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || [[ -n ${PGADVISORY_TEST_CHROMIUM:-} ]]
}
missing=()
have_pgbouncer || missing+=(pgbouncer)
have_chromium || missing+=(chromium)
if [[ ${#missing[@]} -gt 0 ]] && [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
	echo "installing Debian's ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >/dev/null || echo "test: warning: apt-get update failed" >&2
	apt-get install -y -q --no-install-recommends "${missing[@]}" 2>&1 | tail -n 3 || true
fi
if have_pgbouncer; then
	"${PGADVISORY_TEST_PGBOUNCER:-$(command -v pgbouncer || echo /usr/sbin/pgbouncer)}" --version | head -n 1
elif under_ci; then
	echo "test: error: pgbouncer is not installed and could not be (CI=true); apt-get install pgbouncer" >&2
	exit 1
else
	echo "test: warning: pgbouncer is not installed; the tests that need it skip (under CI=true this fails)" >&2
fi
if have_chromium; then
	"${PGADVISORY_TEST_CHROMIUM:-$(command -v chromium || command -v chromium-browser)}" --version 2>/dev/null | head -n 1
elif under_ci; then
	echo "test: error: chromium is not installed and could not be (CI=true); apt-get install chromium" >&2
	exit 1
else
	echo "test: warning: chromium is not installed; the page test skips (under CI=true this fails)" >&2
fi
phase_done "debian packages"

# The nested modules: every go.mod below the root, each a module of its own
# so that its dependencies stay out of the library's (the examples, the
# command, the integrations, the comparison benchmarks). Each is tidied,
# vetted and checked like the root; all but ci/bench, which holds
# benchmarks alone, run their tests in the same stream.
mapfile -t nested < <(find . -mindepth 2 -name go.mod -not -path './.git/*' -printf '%h\n' | sed 's#^\./##' | sort)
tested=()
for mod in "${nested[@]}"; do
	[[ $mod == ci/bench ]] || tested+=("$mod")
done

step "gofmt"
unformatted="$(gofmt -l .)"
if [[ -n $unformatted ]]; then
	echo "test: error: these files need gofmt -w:" >&2
	echo "$unformatted" | sed 's/^/    /' >&2
	exit 1
fi
echo "all files formatted"

step "go mod tidy"
# go.mod and go.sum must be what go mod tidy makes of them, in the library's
# module and in every nested one.
for mod in . "${nested[@]}"; do
	if ! tidy="$(cd "$mod" && go mod tidy -diff 2>&1)"; then
		echo "test: error: go mod tidy -diff failed in $mod: go.mod or go.sum is not tidy (run go mod tidy), or the check could not run:" >&2
		printf '%s\n' "$tidy" | grep -v '^go: downloading ' | sed 's/^/    /' >&2
		exit 1
	fi
done
echo "go.mod and go.sum are tidy"
phase_done "go mod tidy"

step "go vet"
for mod in . "${nested[@]}"; do
	(cd "$mod" && go vet ./...)
done
phase_done "go vet"

step "staticcheck"
# A pinned version from the module proxy, into GOBIN (or GOPATH/bin), outside
# the repository, built in the background since the start. A machine that
# cannot get it says so and goes on; under CI=true that is a failure, since
# the check would silently not run.
if [[ -n $staticcheck_pid ]]; then
	wait "$staticcheck_pid" || tail -n 3 "$staticcheck_log"
fi
rm -f "$staticcheck_log"
if pinned_staticcheck; then
	for mod in . "${nested[@]}"; do
		(cd "$mod" && "$staticcheck" ./...)
	done
	echo "staticcheck $staticcheck_version: clean"
elif under_ci; then
	echo "test: error: staticcheck $staticcheck_version could not be installed (CI=true)" >&2
	exit 1
else
	echo "test: warning: staticcheck $staticcheck_version could not be installed; skipped (under CI=true this fails)" >&2
fi
phase_done staticcheck

step "go test"
# Verbose output goes to a log, which stays after the run (in ci/logs/,
# which git ignores, or at PGADVISORY_TEST_LOG) for CI to show or keep;
# the terminal gets the package results, the matrix of servers and drivers
# the integration tests ran on, and, when something fails, everything but
# the passing noise. ci/testreport turns go test's events into that log,
# and reports the slowest tests, every skipped test with its reason, every
# failed one, and the totals.
work="$(mktemp -d -t pgadvisory-test.XXXXXX)"
trap 'rm -rf "$work"' EXIT
log="${PGADVISORY_TEST_LOG:-$root/ci/logs/test.log}"
mkdir -p "$(dirname "$log")"
report="${log%.log}.report"
go build -o "$work/testreport" ./ci/testreport
start=$SECONDS
status=0
# The nested modules' tests run in the same stream, with the same flags.
# Package arguments ("./advisory/") name the library's packages, so the
# nested modules' runs leave them out.
example_args=()
for arg in "$@"; do
	case "$arg" in
	./* | ../*) ;;
	*) example_args+=("$arg") ;;
	esac
done
# Either run's failure fails the stream: a group's own status would be its
# last command's alone.
{
	rc=0
	go test -race -count=1 -timeout 25m -json "$@" ./... 2>&1 || rc=$?
	for mod in "${tested[@]}"; do
		(cd "$mod" && go test -race -count=1 -timeout 25m -json ${example_args[@]+"${example_args[@]}"} ./... 2>&1) || rc=$?
	done
	exit "$rc"
} | "$work/testreport" "$log" >"$report" || status=$?

grep -E '^(ok|FAIL|\?)[[:space:]]' "$log" || true
echo
echo "integration tests and subtests passed, per server/driver:"
grep -E -- '--- PASS: ' "$log" |
	grep -oE '/pg[0-9]+(-[0-9]+)?/(pgx-cancel|pgx|pq)([/ ]|$)' |
	sed -E 's#^/##; s#[/ ]$##' | sort | uniq -c | sed 's/^/  /' || true
if [[ $status -ne 0 ]]; then
	echo
	echo "== failures (log without passing tests):"
	grep -vE '^(=== (RUN|PAUSE|CONT|NAME)|[[:space:]]*--- PASS: )' "$log" | tail -n 400
fi
echo
cat "$report"
echo "tests took $((SECONDS - start))s"
echo "log: $log"
echo "report: $report"
exit "$status"
