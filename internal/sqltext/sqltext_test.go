package sqltext_test

import (
	"math"
	"slices"
	"testing"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

func TestStatements(t *testing.T) {
	t.Parallel()
	big := sqltext.Key{Bigint: math.MinInt64}
	pair := sqltext.Key{Pair: true, A: math.MinInt32, B: 7}
	tests := []struct {
		name, got, want string
	}{
		{"Lock", sqltext.Lock(false, false, big), "SELECT pg_catalog.pg_advisory_lock(-9223372036854775808)"},
		{"XactLockShared", sqltext.Lock(true, true, pair), "SELECT pg_catalog.pg_advisory_xact_lock_shared(-2147483648,7)"},
		{"LockMany", sqltext.Lock(false, false, big, sqltext.Key{Bigint: 1}, pair),
			"SELECT pg_catalog.pg_advisory_lock(k) FROM (VALUES (-9223372036854775808),(1)) AS k(k) " +
				"UNION ALL SELECT pg_catalog.pg_advisory_lock(a,b) FROM (VALUES (-2147483648,7)) AS p(a,b)"},
		{"LockManyPairsOnly", sqltext.Lock(true, false, pair, pair),
			"SELECT pg_catalog.pg_advisory_xact_lock(a,b) FROM (VALUES (-2147483648,7),(-2147483648,7)) AS p(a,b)"},
		{"TryLock", sqltext.TryLock(sqltext.Guarded, true, false, big), "SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL " +
			"WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL " +
			"ELSE pg_catalog.pg_try_advisory_xact_lock(-9223372036854775808) END"},
		{"TryLockOwnMark", sqltext.TryLock(sqltext.OwnMark(8177), false, true, pair),
			"SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL " +
				"WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 AND pg_catalog.current_setting('pgadvisory.lease', true) <> '8177' " +
				"THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL " +
				"ELSE pg_catalog.pg_try_advisory_lock_shared(-2147483648,7) END"},
		{"Unlock", sqltext.Unlock(true, pair), "SELECT 1 WHERE pg_catalog.pg_advisory_unlock_shared(-2147483648,7)"},
		{"UnlockMany", sqltext.Unlock(false, big, pair),
			"SELECT 1 FROM (VALUES (-9223372036854775808)) AS k(k) WHERE pg_catalog.pg_advisory_unlock(k) " +
				"UNION ALL SELECT 1 FROM (VALUES (-2147483648,7)) AS p(a,b) WHERE pg_catalog.pg_advisory_unlock(a,b)"},
		{"EndScopeAll", sqltext.EndScope(false, true, big),
			"SELECT 1 FROM pg_catalog.generate_series(1, CASE WHEN CASE WHEN pg_catalog.pg_advisory_unlock(-9223372036854775808) THEN pg_catalog.pg_advisory_unlock_all() IS NOT NULL ELSE false END THEN 1 ELSE 0 END + " +
				"CASE WHEN pg_catalog.statement_timestamp() = pg_catalog.transaction_timestamp() THEN 0 ELSE 2 END)"},
		{"EndScopeKey", sqltext.EndScope(true, false, pair),
			"SELECT 1 FROM pg_catalog.generate_series(1, CASE WHEN pg_catalog.pg_advisory_unlock_shared(-2147483648,7) THEN 1 ELSE 0 END + " +
				"CASE WHEN pg_catalog.statement_timestamp() = pg_catalog.transaction_timestamp() THEN 0 ELSE 2 END)"},
		{"KeyString", big.String() + " " + pair.String(), "-9223372036854775808 -2147483648:7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.got != tt.want {
				t.Errorf("\n got %s\nwant %s", tt.got, tt.want)
			}
		})
	}
}

func TestStatementForms(t *testing.T) {
	t.Parallel()
	big := sqltext.Key{Bigint: math.MinInt64}
	pair := sqltext.Key{Pair: true, A: math.MinInt32, B: 7}
	tests := []struct {
		name string
		got  sqltext.Stmt
		want string
		args []any
	}{
		{"TryLockInline", sqltext.TryLockStmt(sqltext.Inline, sqltext.Guarded, true, true, pair), sqltext.TryLock(sqltext.Guarded, true, true, pair), nil},
		{"TryXactLockParams", sqltext.TryLockStmt(sqltext.Params, sqltext.Guarded, true, false, big), "SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL " +
			"WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL " +
			"ELSE pg_catalog.pg_try_advisory_xact_lock($1) END", []any{int64(math.MinInt64)}},
		{"UnlockInline", sqltext.UnlockStmt(sqltext.Inline, false, big), sqltext.Unlock(false, big), nil},
		{"UnlockSharedParams", sqltext.UnlockStmt(sqltext.Params, true, pair), "SELECT 1 WHERE pg_catalog.pg_advisory_unlock_shared($1,$2)", []any{int32(math.MinInt32), int32(7)}},
		{"Plain", sqltext.Plain(sqltext.UnlockAll), sqltext.UnlockAll, nil},
		{"LeaseStartInline", sqltext.LeaseStart(sqltext.Inline, false, big, false),
			"SELECT pg_catalog.pg_backend_pid(), pg_catalog.pg_is_in_recovery(), h.mine, NULL::pg_catalog.int8, " +
				"CASE WHEN h.mine AND COALESCE(pg_catalog.current_setting('pgadvisory.lease', true), '') = '' THEN " +
				"pg_catalog.set_config('pgadvisory.lease', pg_catalog.floor(pg_catalog.random() * 9007199254740992)::pg_catalog.int8::pg_catalog.text, false)::pg_catalog.int8 END, " +
				"h.other FROM (SELECT COALESCE(pg_catalog.bool_or(pid = pg_catalog.pg_backend_pid()), false) AS mine, " +
				"pg_catalog.min(pid) FILTER (WHERE pid <> pg_catalog.pg_backend_pid()) AS other FROM pg_catalog.pg_locks WHERE locktype = 'advisory' " +
				"AND classid = 2147483648::pg_catalog.int8::pg_catalog.oid AND objid = 0::pg_catalog.int8::pg_catalog.oid AND objsubid = 1 AND mode = 'ExclusiveLock' AND granted) AS h", nil},
		{"LeaseStartParams", sqltext.LeaseStart(sqltext.Params, true, pair, false),
			"SELECT pg_catalog.pg_backend_pid(), pg_catalog.pg_is_in_recovery(), h.mine, NULL::pg_catalog.int8, " +
				"CASE WHEN h.mine AND COALESCE(pg_catalog.current_setting('pgadvisory.lease', true), '') = '' THEN " +
				"pg_catalog.set_config('pgadvisory.lease', pg_catalog.floor(pg_catalog.random() * 9007199254740992)::pg_catalog.int8::pg_catalog.text, false)::pg_catalog.int8 END, " +
				"h.other FROM (SELECT COALESCE(pg_catalog.bool_or(pid = pg_catalog.pg_backend_pid()), false) AS mine, " +
				"NULL::pg_catalog.int4 AS other FROM pg_catalog.pg_locks WHERE locktype = 'advisory' " +
				"AND classid = $1::pg_catalog.int8::pg_catalog.oid AND objid = $2::pg_catalog.int8::pg_catalog.oid AND objsubid = 2 AND mode = 'ShareLock' AND granted) AS h", []any{int64(2147483648), int64(7)}},
	}
	for _, tt := range tests {
		if tt.got.Query != tt.want {
			t.Errorf("%s: query\n got %s\nwant %s", tt.name, tt.got.Query, tt.want)
		}
		if args := tt.got.Args; !slices.Equal(args, tt.args) {
			t.Errorf("%s: args %#v; want %#v", tt.name, args, tt.args)
		}
	}
}
