#!/usr/bin/env bash
# The comparison benchmarks, with one command: bash ci/bench.sh
#
# It builds the local PostgreSQL images when they are missing
# (ci/build-images.sh), installs redis-server, and PostgreSQL for its
# pgbench and its server binaries, from Debian's packages when they are
# missing (as root), then runs, once against servers in Docker (the images)
# and once against a server of the host's own binaries (no port proxy;
# PostgreSQL 15 on Debian bookworm):
#
#   - ci/bench: BenchmarkHandoff (the library against SQL by hand, polling
#     and redsync on a local Redis), BenchmarkXactThroughput (8 clients:
#     the library against SQL by hand and pgbench), BenchmarkMiddleware
#     (httplock.XactLock against a handler by hand, 1 and 8 clients) and
#     BenchmarkWaitOrder, variants interleaved within each of 5 repeats;
#   - advisory: the interleaved lock benchmarks (TryLock+Unlock and
#     TryXactLock against SELECT 1 and every form by hand, on one
#     connection; WithXactLock against the same transaction by hand; the
#     forms of the library's own statements), 5 runs;
#   - pgxlock: its benchmarks against pgx by hand (...VsHand: the lock
#     calls, the transaction scope against pgx.BeginFunc, 8-client
#     throughput beside pgbench, and the handoff), 7 repeats each;
#
# then, once, advisory's sequential lock benchmarks (round trips and
# allocations per call, in Docker) and BenchmarkOverhead in advisory and
# middleware/httplock (the library's own CPU, on a driver that answers at
# once). Every interleaved comparison runs in an order shuffled from one
# seed, PGADVISORY_BENCH_SEED, drawn here unless it is set.
#
# The results go to the terminal and to bench-results/ (not committed):
# meta.txt (the seed, the machine, Go), load.txt (the load average every
# 10 s), and per environment (docker/, local/) the benchmarks' output and
# the figures of every repeat (data.json). It then draws the handoff
# latencies in Docker as docs/handoff.png, and renders docs/benchmarks.md
# from the results and the prose of ci/bench/report/benchmarks.md.tmpl
# (go run ./report in ci/bench): the page is never edited by hand.
# Extra arguments go to every go test run of the two environments, for
# example -benchtime=2x for more repeats.
#
# A step that fails is reported and the others still run; the script then
# exits non-zero, after the report.
#
# Environment: PGADVISORY_TEST_IMAGES, as for ci/test.sh;
# PGADVISORY_BENCH_SEED, the seed of the orders; PGADVISORY_BENCH_ENVS,
# the environments to run ("docker local" unless set);
# PGADVISORY_BENCH_COMPARE, the ci/bench benchmarks to run (a -bench
# pattern; the four above unless set: the Locker's own benchmarks in
# ci/bench run on their own).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

envs="${PGADVISORY_BENCH_ENVS:-docker local}"
compare="${PGADVISORY_BENCH_COMPARE:-^Benchmark(Handoff|XactThroughput|Middleware|WaitOrder)\$}"
images="${PGADVISORY_TEST_IMAGES:-pgadvisory/postgres:15,pgadvisory/postgres:17}"
if [[ " $envs " == *" docker "* ]]; then
	./ci/build-images.sh
fi

missing=()
command -v redis-server >/dev/null 2>&1 || [[ -x /usr/bin/redis-server ]] || missing+=(redis-server)
command -v pgbench >/dev/null 2>&1 || compgen -G '/usr/lib/postgresql/*/bin/pgbench' >/dev/null || missing+=(postgresql)
if [[ " $envs " == *" local "* ]] && ! compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null; then
	missing+=(postgresql)
fi
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
rm -rf "$out"
mkdir -p "$out"
seed="${PGADVISORY_BENCH_SEED:-$(od -An -N6 -tu8 /dev/urandom | tr -d ' ')}"
export PGADVISORY_BENCH_SEED="$seed"
{
	echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "seed: $seed"
	echo "go: $(go env GOVERSION) $(go env GOOS)/$(go env GOARCH)"
	echo "kernel: $(uname -sr)"
	echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
	echo "cpus: $(nproc)"
	echo "memory: $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)"
	echo "docker: $(docker version --format '{{.Server.Version}}' 2>/dev/null || echo none)"
	echo "environments: $envs"
	echo "compare: $compare"
	echo "args: $*"
} >"$out/meta.txt"
cat "$out/meta.txt"

# The load average every 10 s while the suite runs.
(while :; do
	echo "$(date +%s) $(cut -d' ' -f1-3 /proc/loadavg)"
	sleep 10
done) >"$out/load.txt" &
sampler=$!
trap 'kill "$sampler" 2>/dev/null || true' EXIT

failed=0

# step runs the command after its first argument, a file that its output
# goes to as well as the terminal, and records a failure without stopping.
step() {
	local file="$1"
	shift
	if ! "$@" 2>&1 | tee "$file"; then
		echo "bench: error: failed: $*" >&2
		failed=1
	fi
}

# suite runs ci/bench and advisory's interleaved benchmarks in the
# environment named $1, the rest of the arguments going to go test.
suite() {
	local env="$1"
	shift
	mkdir -p "$out/$env"
	echo "== $env: ci/bench: handoff, throughput, middleware, wait order"
	(
		cd ci/bench
		export PGADVISORY_BENCH_OUT="$out/$env/handoff.json" PGADVISORY_BENCH_DATA="$out/$env/data.json"
		step "$out/$env/compare.txt" go test -run '^$' -bench "$compare" -benchtime=1x -timeout 90m -v "$@" .
		exit "$failed"
	) || failed=1
	echo "== $env: advisory: interleaved lock benchmarks"
	step "$out/$env/advisory.txt" go test -run '^$' -bench Interleaved -benchtime=1000x -count=5 -timeout 90m "$@" ./advisory/
	echo "== $env: pgxlock against pgx by hand"
	step "$out/$env/pgxlock.txt" go test -run '^$' -bench VsHand -benchtime=1x -timeout 60m -v "$@" ./pgxlock/
}

for env in $envs; do
	case "$env" in
	docker) (
		export PGADVISORY_TEST_IMAGES="$images"
		suite docker "$@"
		exit "$failed"
	) || failed=1 ;;
	local) (
		# No Docker: the harness falls back to the host's binaries.
		unset PGADVISORY_TEST_IMAGES
		export DOCKER_HOST=unix:///nonexistent
		suite local "$@"
		exit "$failed"
	) || failed=1 ;;
	*)
		echo "bench: error: unknown environment $env (docker, local)" >&2
		exit 1
		;;
	esac
done

first="${envs%% *}"
echo "== $first: advisory: round trips and allocations per call"
if [[ "$first" == docker ]]; then
	export PGADVISORY_TEST_IMAGES="$images"
else
	unset PGADVISORY_TEST_IMAGES
	export DOCKER_HOST=unix:///nonexistent
fi
step "$out/$first/sequential.txt" go test -run '^$' -bench '^Benchmark(TryLock|TryXactLock|WithXactLock)$' -benchtime=200x -timeout 60m ./advisory/
echo "== the library's own CPU, on a driver that answers at once"
step "$out/overhead.txt" go test -run '^$' -bench '^BenchmarkOverhead$' -benchtime=200000x -count=5 ./advisory/ ./middleware/httplock/

kill "$sampler" 2>/dev/null || true
echo "== chart and report"
if [[ -s "$out/$first/handoff.json" ]]; then
	(cd ci/bench && go run ./chart -in "$out/$first/handoff.json" -out "$root/docs/handoff.png") || failed=1
fi
(cd ci/bench && go run ./report -results "$out" -template report/benchmarks.md.tmpl -out "$root/docs/benchmarks.md") || failed=1
echo "wrote docs/handoff.png and docs/benchmarks.md; results in $out"
if ((failed)); then
	echo "bench: error: a step failed; see above" >&2
	exit 1
fi
