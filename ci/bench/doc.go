// Package bench holds the comparison benchmarks: the library against the
// same SQL written by hand on each driver, against waiting by polling,
// against redsync on Redis, and against pgbench, and the HTTP middleware
// against a handler written by hand. It is a module of its own
// so that the Redis client the comparison needs stays out of the library's
// requirements. It starts its own PostgreSQL servers through the project's
// harness and its own Redis from the host's redis-server. ci/bench.sh runs
// it, in Docker and on the host's own server, then draws the chart
// (./chart) and renders docs/benchmarks.md from the results (./report).
package bench
