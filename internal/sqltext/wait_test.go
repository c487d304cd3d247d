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
	// The check, a select-list entry right after the bound: NULL, or the
	// refusal's error (see guard.go).
	const check = "CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL " +
		"WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL " +
		"ELSE NULL END, "
	const ownCheck = "CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL " +
		"WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 AND pg_catalog.current_setting('pgadvisory.lease', true) <> '8177' " +
		"THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE NULL END, "
	tests := []struct {
		name, got, want string
	}{
		{"SessionSlice", sqltext.SessionSlice(sqltext.Guarded, false, 1100, k),
			bound + check + "(SELECT pg_catalog.count(*) FROM (SELECT pg_catalog.pg_advisory_xact_lock(k) FROM (VALUES (42)) AS k(k)) AS l), " +
				"(SELECT pg_catalog.count(*) FROM (SELECT pg_catalog.pg_advisory_lock(k) FROM (VALUES (42)) AS k(k)) AS l) OFFSET 0) AS t"},
		{"SessionSliceShared", sqltext.SessionSlice(sqltext.Guarded, true, 1100, p),
			bound + check + "(SELECT pg_catalog.count(*) FROM (SELECT pg_catalog.pg_advisory_xact_lock_shared(a,b) FROM (VALUES (1,-2)) AS p(a,b)) AS l), " +
				"(SELECT pg_catalog.count(*) FROM (SELECT pg_catalog.pg_advisory_lock_shared(a,b) FROM (VALUES (1,-2)) AS p(a,b)) AS l) OFFSET 0) AS t"},
		{"SessionSliceKeys", sqltext.SessionSlice(sqltext.Guarded, false, 1100, k, p),
			bound + check + "(SELECT pg_catalog.count(*) FROM (" + sqltext.Lock(true, false, k, p) + ") AS l), " +
				"(SELECT pg_catalog.count(*) FROM (" + sqltext.Lock(false, false, k, p) + ") AS l) OFFSET 0) AS t"},
		{"SessionSliceOwnMark", sqltext.SessionSlice(sqltext.OwnMark(8177), false, 1100, k),
			bound + ownCheck + "(SELECT pg_catalog.count(*) FROM (SELECT pg_catalog.pg_advisory_xact_lock(k) FROM (VALUES (42)) AS k(k)) AS l), " +
				"(SELECT pg_catalog.count(*) FROM (SELECT pg_catalog.pg_advisory_lock(k) FROM (VALUES (42)) AS k(k)) AS l) OFFSET 0) AS t"},
		{"SessionSliceOwnMarkParams", sqltext.SessionSliceStmt(sqltext.Params, sqltext.OwnMark(8177), false, 1100, 0, k).Query,
			"SELECT pg_catalog.set_config('lock_timeout', $1, true), " + ownCheck +
				"pg_catalog.pg_advisory_xact_lock($3), pg_catalog.pg_sleep(0), pg_catalog.set_config('lock_timeout', $2, true), pg_catalog.pg_advisory_lock($3)"},
		{"XactSlice", sqltext.XactSlice(false, 1100, k),
			bound + "pg_catalog.pg_advisory_xact_lock(42) OFFSET 0) AS t"},
		{"GuardedXactSlice", sqltext.GuardedXactSlice(sqltext.Guarded, false, 1100, k),
			bound + check + "pg_catalog.pg_advisory_xact_lock(42) OFFSET 0) AS t"},
		{"GuardedXactKeySlice", sqltext.GuardedXactKeySlice(sqltext.Guarded, false, 1100, 2000, k),
			"SELECT pg_catalog.set_config('lock_timeout', '1100', true), " + check +
				"pg_catalog.pg_advisory_xact_lock(42), pg_catalog.set_config('lock_timeout', '2000', true)"},
		{"GuardedXactKeySliceShared", sqltext.GuardedXactKeySlice(sqltext.OwnMark(8177), true, 1100, 0, p),
			"SELECT pg_catalog.set_config('lock_timeout', '1100', true), " + ownCheck +
				"pg_catalog.pg_advisory_xact_lock_shared(1,-2), pg_catalog.set_config('lock_timeout', '0', true)"},
		{"GuardedXactSliceOwnMark", sqltext.GuardedXactSlice(sqltext.OwnMark(8177), true, 1100, k, p),
			bound + ownCheck + "(SELECT pg_catalog.count(*) FROM (" + sqltext.Lock(true, true, k, p) + ") AS l) OFFSET 0) AS t"},
		{"EndRefusedSliceSavepoint", sqltext.EndRefusedSlice(true, "BEGIN"), sqltext.LeaveWaitSavepoint},
		{"EndRefusedSliceOwned", sqltext.EndRefusedSlice(false, "BEGIN ISOLATION LEVEL REPEATABLE READ"),
			"ROLLBACK; BEGIN ISOLATION LEVEL REPEATABLE READ"},
		{"SessionSliceParams", sqltext.SessionSliceStmt(sqltext.Params, sqltext.Guarded, false, 1100, 0, p).Query,
			"SELECT pg_catalog.set_config('lock_timeout', $1, true), " + check +
				"pg_catalog.pg_advisory_xact_lock($3,$4), pg_catalog.pg_sleep(0), pg_catalog.set_config('lock_timeout', $2, true), pg_catalog.pg_advisory_lock($3,$4)"},
		{"XactSliceParams", sqltext.XactSliceStmt(sqltext.Params, true, 1100, k).Query,
			"SELECT pg_catalog.set_config('lock_timeout', t.prev, true) FROM (SELECT pg_catalog.current_setting('lock_timeout') AS prev, " +
				"pg_catalog.set_config('lock_timeout', $1, true), pg_catalog.pg_advisory_xact_lock_shared($2) OFFSET 0) AS t"},
		{"SessionSliceInline", sqltext.SessionSliceStmt(sqltext.Inline, sqltext.Guarded, false, 1100, 2000, k).Query,
			"SELECT pg_catalog.set_config('lock_timeout', '1100', true), " + check +
				"pg_catalog.pg_advisory_xact_lock(42), pg_catalog.pg_sleep(0), pg_catalog.set_config('lock_timeout', '2000', true), pg_catalog.pg_advisory_lock(42)"},
		{"SessionSliceInlineShared", sqltext.SessionSliceStmt(sqltext.Inline, sqltext.Guarded, true, 1100, 0, p).Query,
			"SELECT pg_catalog.set_config('lock_timeout', '1100', true), " + check +
				"pg_catalog.pg_advisory_xact_lock_shared(1,-2), pg_catalog.pg_sleep(0), pg_catalog.set_config('lock_timeout', '0', true), pg_catalog.pg_advisory_lock_shared(1,-2)"},
		{"DirectSliceInline", sqltext.DirectSliceStmt(sqltext.Inline, sqltext.Guarded, false, 1100, k).Query,
			"SELECT pg_catalog.set_config('lock_timeout', '1100', true), " + check + "pg_catalog.pg_advisory_lock(42)"},
		{"DirectSliceParamsShared", sqltext.DirectSliceStmt(sqltext.Params, sqltext.Guarded, true, 1100, p).Query,
			"SELECT pg_catalog.set_config('lock_timeout', $1, true), " + check + "pg_catalog.pg_advisory_lock_shared($2,$3)"},
		{"DirectSliceOwnMarkParams", sqltext.DirectSliceStmt(sqltext.Params, sqltext.OwnMark(8177), false, 1100, k).Query,
			"SELECT pg_catalog.set_config('lock_timeout', $1, true), " + ownCheck + "pg_catalog.pg_advisory_lock($2)"},
		{"HeldHereInline", sqltext.HeldHere(sqltext.Inline, false, k).Query,
			"SELECT 1 FROM pg_catalog.pg_locks WHERE locktype = 'advisory' AND pid = pg_catalog.pg_backend_pid() AND " +
				"classid = 0::pg_catalog.int8::pg_catalog.oid AND objid = 42::pg_catalog.int8::pg_catalog.oid AND objsubid = 1 AND mode = 'ExclusiveLock' AND granted"},
		{"HeldHereParamsShared", sqltext.HeldHere(sqltext.Params, true, p).Query,
			"SELECT 1 FROM pg_catalog.pg_locks WHERE locktype = 'advisory' AND pid = pg_catalog.pg_backend_pid() AND " +
				"classid = $1::pg_catalog.int8::pg_catalog.oid AND objid = $2::pg_catalog.int8::pg_catalog.oid AND objsubid = 2 AND mode = 'ShareLock' AND granted"},
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
