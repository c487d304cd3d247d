package advisoryprom_test

import (
	"testing"

	"github.com/pgadvisory/pgadvisory/pgtest"
)

// TestMain lets pgtest stop the PostgreSQL servers that the integration
// tests start.
func TestMain(m *testing.M) { pgtest.Main(m) }
