package keyspace

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pgadvisory/pgadvisory/internal/sqlcheck"
)

// TestStatementsQualified fails when a statement Sync sends on the default
// table names a function, relation or cast type without its schema, which
// the session's search_path could then redirect.
func TestStatementsQualified(t *testing.T) {
	t.Parallel()
	table, err := quoteTable(DefaultTable)
	if err != nil {
		t.Fatal(err)
	}
	for name, q := range map[string]string{
		"Create": syncCreateSQL, "Probe": syncProbeSQL, "Select": syncSelectSQL,
		"Insert": syncInsertSQL, "Update": syncUpdateSQL,
	} {
		if strings.Contains(q, "%") {
			q = fmt.Sprintf(q, table)
		}
		if bad := sqlcheck.Unqualified(q); len(bad) > 0 {
			t.Errorf("%s: %s names without a schema: %v", name, q, bad)
		}
	}
}
