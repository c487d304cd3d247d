package bench_test

import (
	"testing"

	"github.com/pgadvisory/pgadvisory/pgtest"
)

// TestMain starts the PostgreSQL servers the benchmarks use, stops them at
// the end, and then writes the figures the benchmarks recorded
// (PGADVISORY_BENCH_DATA) for ci/bench/report.
func TestMain(m *testing.M) { pgtest.Main(m, writeData) }
