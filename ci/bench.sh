#!/usr/bin/env bash
# The comparison benchmarks, with one command: bash ci/bench.sh
#
# It builds the local PostgreSQL images when they are missing
# (ci/build-images.sh), installs redis-server, and PostgreSQL for its
# pgbench, from Debian's packages when they are missing (as root), then
# runs, against servers the harness starts:
#
#   - ci/bench: BenchmarkHandoff (the library against SQL by hand, polling
#     and redsync on a local Redis) and BenchmarkXactThroughput (8 clients:
#     the library against SQL by hand and pgbench) and BenchmarkMiddleware
#     (httplock.XactLock against a handler by hand, 1 and 8 clients),
#     variants interleaved within each of 5 repeats;
#   - advisory: the interleaved lock benchmarks (TryLock+Unlock and
#     TryXactLock against SELECT 1 and the other SQL forms, on one
#     connection; WithXactLock against the same transaction by hand), 5 runs;
#
# and draws the handoff latencies as docs/handoff.png. The results go to
# the terminal and to bench-results/ (not committed); docs/benchmarks.md
# records a run. Extra arguments go to both go test runs, for example
# -benchtime=2x for more repeats.
#
# Environment: PGADVISORY_TEST_IMAGES, as for ci/test.sh.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

./ci/build-images.sh
export PGADVISORY_TEST_IMAGES="${PGADVISORY_TEST_IMAGES:-pgadvisory/postgres:15,pgadvisory/postgres:17}"

missing=()
command -v redis-server >/dev/null 2>&1 || [[ -x /usr/bin/redis-server ]] || missing+=(redis-server)
command -v pgbench >/dev/null 2>&1 || compgen -G '/usr/lib/postgresql/*/bin/pgbench' >/dev/null || missing+=(postgresql)
if ((${#missing[@]})); then
	if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
		echo "bench: error: install ${missing[*]} (Debian's packages)" >&2
		exit 1
	fi
	echo "installing Debian's ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >/dev/null || echo "bench: warning: apt-get update failed" >&2
	apt-get install -y -q --no-install-recommends "${missing[@]}" 2>&1 | tail -n 3
fi

out="$root/bench-results"
mkdir -p "$out"
echo "== ci/bench: handoff and throughput"
(cd ci/bench && PGADVISORY_BENCH_OUT="$out/handoff.json" \
	go test -run '^$' -bench . -benchtime=1x -timeout 60m -v "$@" . | tee "$out/compare.txt")
echo "== advisory: interleaved lock benchmarks"
go test -run '^$' -bench Interleaved -benchtime=1000x -count=5 -timeout 60m "$@" ./advisory/ | tee "$out/advisory.txt"
echo "== chart"
(cd ci/bench && go run ./chart -in "$out/handoff.json" -out "$root/docs/handoff.png")
echo "wrote docs/handoff.png; results in $out"
