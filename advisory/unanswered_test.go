package advisory_test

import (
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/scope"
)

// Unit tests of what bounds a call on a server that does not answer
// (unanswered.go).

// TestAbortMargin checks that advisory's AbortMargin, written as a literal
// so that go doc shows its value, is the engine's.
func TestAbortMargin(t *testing.T) {
	t.Parallel()
	if advisory.AbortMargin != scope.AbortMargin {
		t.Fatalf("advisory.AbortMargin = %v, the engine's is %v", advisory.AbortMargin, scope.AbortMargin)
	}
}
