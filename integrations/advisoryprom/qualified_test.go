package advisoryprom

import (
	"testing"

	"github.com/pgadvisory/pgadvisory/internal/sqlcheck"
)

// TestCollectorStatementQualified fails when the scrape's statement names
// a function, relation or cast type without its schema, which the
// session's search_path could then redirect.
func TestCollectorStatementQualified(t *testing.T) {
	t.Parallel()
	if bad := sqlcheck.Unqualified(scrapeSQL); len(bad) > 0 {
		t.Errorf("%s: names without a schema: %v", scrapeSQL, bad)
	}
}
