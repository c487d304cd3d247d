package migratelock_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/pgadvisory/pgadvisory/pgtest"
)

// TestMain lets pgtest stop the servers the tests start, then checks that
// no goroutine is left. migrate's own are ignored: when Up stops at an
// error, migrate leaves the goroutine that buffered the next migration's
// body blocked on a pipe nobody reads (readUp starts it, Migration.Buffer
// blocks), whatever the driver.
func TestMain(m *testing.M) {
	ignore := goleak.IgnoreCurrent()
	pgtest.Main(m, func() error {
		return goleak.Find(ignore, goleak.IgnoreAnyFunction("github.com/golang-migrate/migrate/v4.(*Migration).Buffer"))
	})
}
