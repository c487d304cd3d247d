package bench_test

import (
	"testing"

	"github.com/pgadvisory/pgadvisory/pgtest"
)

// TestMain starts the PostgreSQL servers the benchmarks use, and stops
// them at the end.
func TestMain(m *testing.M) { pgtest.Main(m) }
