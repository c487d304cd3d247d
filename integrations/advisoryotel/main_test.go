package advisoryotel_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/pgadvisory/pgadvisory/pgtest"
)

// TestMain lets pgtest stop the servers the tests start, then checks that
// no goroutine is left behind: the observer starts none, and every lease
// the tests take ends with its release or loss.
func TestMain(m *testing.M) {
	ignore := goleak.IgnoreCurrent()
	pgtest.Main(m, func() error { return goleak.Find(ignore) })
}
