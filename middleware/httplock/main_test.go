package httplock_test

import (
	"testing"

	"github.com/pgadvisory/pgadvisory/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
