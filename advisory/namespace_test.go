package advisory_test

import (
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// TestNamespaceKeys checks that a Namespace makes the keys of its ID.
func TestNamespaceKeys(t *testing.T) {
	t.Parallel()
	billing := advisory.Namespace{ID: 7, Name: "billing", Owner: "team-payments", Doc: "invoice runs"}
	if got, want := billing.Key(3), advisory.PairKey(7, 3); got != want {
		t.Errorf("Key(3) = %v, want %v", got, want)
	}
	if got, want := billing.NameKey("nightly"), advisory.NameKey(7, "nightly"); got != want {
		t.Errorf("NameKey(nightly) = %v, want %v", got, want)
	}
}
