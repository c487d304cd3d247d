package pgxlock_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/pgadvisory/pgadvisory/pgtest"
)

// TestMain lets pgtest stop the PostgreSQL servers that the integration
// tests start, and then checks that no goroutine the tests started is
// left.
func TestMain(m *testing.M) {
	ignore := goleak.IgnoreCurrent()
	pgtest.Main(m, func() error { return goleak.Find(ignore) })
}
