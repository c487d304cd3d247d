package inspect

import (
	"fmt"
	"testing"

	"github.com/pgadvisory/pgadvisory/internal/sqlcheck"
)

// TestStatementsQualified fails when a statement of the package names a
// function, relation or cast type without its schema, which the session's
// search_path could then redirect.
func TestStatementsQualified(t *testing.T) {
	t.Parallel()
	for name, q := range map[string]string{
		"ThisDB": fmt.Sprintf(inspectSQL, inspectThisDB),
		"AllDBs": fmt.Sprintf(inspectSQL, inspectAllDBs),
	} {
		if bad := sqlcheck.Unqualified(q); len(bad) > 0 {
			t.Errorf("%s: %s names without a schema: %v", name, q, bad)
		}
	}
}
