package sqltext_test

import (
	"testing"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

func TestWaitStatements(t *testing.T) {
	t.Parallel()
	k := sqltext.Key{Bigint: 42}
	p := sqltext.Key{Pair: true, A: 1, B: -2}
	const bound = "SELECT pg_catalog.set_config('lock_timeout', t.prev, true) FROM (SELECT pg_catalog.current_setting('lock_timeout') AS prev, " +
		"pg_catalog.set_config('lock_timeout', '1100', true), "
	tests := []struct {
		name, got, want string
	}{
		{"SessionSlice", sqltext.SessionSlice(sqltext.Guarded, false, 1100, k),
			bound + "(SELECT pg_catalog.count(*) FROM (SELECT pg_catalog.pg_advisory_xact_lock(k) FROM (VALUES (42)) AS k(k)) AS l), " +
				"(SELECT pg_catalog.count(*) FROM (SELECT pg_catalog.pg_advisory_lock(k) FROM (VALUES (42)) AS k(k)) AS l) WHERE NOT (pg_catalog.pg_is_in_recovery() OR COALESCE(pg_catalog.current_setting('pgadvisory.lease', true), '') <> '') OFFSET 0) AS t"},
		{"SessionSliceShared", sqltext.SessionSlice(sqltext.Guarded, true, 1100, p),
			bound + "(SELECT pg_catalog.count(*) FROM (SELECT pg_catalog.pg_advisory_xact_lock_shared(a,b) FROM (VALUES (1,-2)) AS p(a,b)) AS l), " +
				"(SELECT pg_catalog.count(*) FROM (SELECT pg_catalog.pg_advisory_lock_shared(a,b) FROM (VALUES (1,-2)) AS p(a,b)) AS l) WHERE NOT (pg_catalog.pg_is_in_recovery() OR COALESCE(pg_catalog.current_setting('pgadvisory.lease', true), '') <> '') OFFSET 0) AS t"},
		{"SessionSliceKeys", sqltext.SessionSlice(sqltext.Guarded, false, 1100, k, p),
			bound + "(SELECT pg_catalog.count(*) FROM (" + sqltext.Lock(true, false, k, p) + ") AS l), " +
				"(SELECT pg_catalog.count(*) FROM (" + sqltext.Lock(false, false, k, p) + ") AS l) WHERE NOT (pg_catalog.pg_is_in_recovery() OR COALESCE(pg_catalog.current_setting('pgadvisory.lease', true), '') <> '') OFFSET 0) AS t"},
		{"XactSlice", sqltext.XactSlice(false, 1100, k),
			bound + "pg_catalog.pg_advisory_xact_lock(42) OFFSET 0) AS t"},
		{"SessionSliceParams", sqltext.SessionSliceStmt(sqltext.Params, sqltext.Guarded, false, 1100, p).Query,
			"SELECT pg_catalog.set_config('lock_timeout', t.prev, true) FROM (SELECT pg_catalog.current_setting('lock_timeout') AS prev, " +
				"pg_catalog.set_config('lock_timeout', $1, true), " +
				"(SELECT pg_catalog.count(*) FROM (SELECT pg_catalog.pg_advisory_xact_lock(a,b) FROM (VALUES ($2::pg_catalog.int4,$3::pg_catalog.int4)) AS p(a,b)) AS l), " +
				"(SELECT pg_catalog.count(*) FROM (SELECT pg_catalog.pg_advisory_lock(a,b) FROM (VALUES ($2::pg_catalog.int4,$3::pg_catalog.int4)) AS p(a,b)) AS l) WHERE NOT (pg_catalog.pg_is_in_recovery() OR COALESCE(pg_catalog.current_setting('pgadvisory.lease', true), '') <> '') OFFSET 0) AS t"},
		{"XactSliceParams", sqltext.XactSliceStmt(sqltext.Params, true, 1100, k).Query,
			"SELECT pg_catalog.set_config('lock_timeout', t.prev, true) FROM (SELECT pg_catalog.current_setting('lock_timeout') AS prev, " +
				"pg_catalog.set_config('lock_timeout', $1, true), pg_catalog.pg_advisory_xact_lock_shared($2) OFFSET 0) AS t"},
		{"SessionSliceInline", sqltext.SessionSliceStmt(sqltext.Inline, sqltext.Guarded, false, 1100, k).Query, sqltext.SessionSlice(sqltext.Guarded, false, 1100, k)},
		{"InSavepoint", sqltext.InSavepoint(false, "SELECT 1"),
			"SAVEPOINT pgadvisory_wait; SELECT 1; RELEASE SAVEPOINT pgadvisory_wait"},
		{"InSavepointAgain", sqltext.InSavepoint(true, "SELECT 1"),
			"ROLLBACK TO SAVEPOINT pgadvisory_wait; SELECT 1; RELEASE SAVEPOINT pgadvisory_wait"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, tt.got, tt.want)
		}
	}
}
