#!/usr/bin/env bash
# The project's single test command. It builds the local PostgreSQL images
# when they are missing (ci/build-images.sh), then checks formatting, runs
# go vet, and runs every test with the race detector against PostgreSQL 15
# and 17. Extra arguments go to `go test`, for example:
#
#   ci/test.sh -run TestLock -v
#
# Environment:
#   PGADVISORY_TEST_IMAGES  images to test on (default: the two local images)
#   PGADVISORY_TEST_DSN     existing servers instead of containers; no build
#   CI=true                 a missing database fails the run, never skips
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

step() { printf '\n== %s\n' "$*"; }
under_ci() { [[ -n ${CI:-} && ${CI:-} != false && ${CI:-} != 0 ]]; }

command -v go >/dev/null 2>&1 || {
	echo "test: error: go is not on PATH" >&2
	exit 1
}

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

step "gofmt"
unformatted="$(gofmt -l .)"
if [[ -n $unformatted ]]; then
	echo "test: error: these files need gofmt -w:" >&2
	echo "$unformatted" | sed 's/^/    /' >&2
	exit 1
fi
echo "all files formatted"

step "go vet"
go vet ./...

step "go test"
start=$SECONDS
go test -race -count=1 -timeout 15m "$@" ./...
echo "tests took $((SECONDS - start))s"
