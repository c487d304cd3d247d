package leader

import (
	"testing"

	"github.com/pgadvisory/pgadvisory/internal/sqlcheck"
)

// TestStatementsQualified fails when the package's statement names a
// function, relation or cast type without its schema, which the session's
// search_path could then redirect.
func TestStatementsQualified(t *testing.T) {
	t.Parallel()
	if bad := sqlcheck.Unqualified(currentQuery); len(bad) > 0 {
		t.Errorf("%s names without a schema: %v", currentQuery, bad)
	}
}
