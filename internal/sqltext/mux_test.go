package sqltext_test

import (
	"math"
	"strings"
	"testing"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

func TestCarrierStatements(t *testing.T) {
	t.Parallel()
	k := sqltext.Key{Bigint: 42}
	ours := "pg_catalog.pg_backend_pid() = 7 AND pg_catalog.current_setting('pgadvisory.lease', true) = '9'"
	tests := []struct {
		name, got, want string
	}{
		{"CarrierTry", sqltext.CarrierTry(7, 9, false, k),
			"SELECT 1 FROM pg_catalog.generate_series(1, CASE WHEN " + ours + " THEN CASE WHEN pg_catalog.pg_try_advisory_lock(42) THEN 2 ELSE 1 END ELSE 0 END)"},
		{"CarrierTryFenced", sqltext.CarrierTryFenced(sqltext.Inline, 7, 9, true, k).Query,
			"SELECT CASE WHEN " + ours + " THEN CASE WHEN pg_catalog.pg_try_advisory_lock_shared(42) THEN t.t ELSE 0 END END " +
				"FROM (SELECT " + nextToken + " AS t OFFSET 0) AS t"},
		{"CarrierUnlock", sqltext.CarrierUnlock(7, 9, false, k),
			"SELECT 1 FROM pg_catalog.generate_series(1, CASE WHEN " + ours + " THEN CASE WHEN pg_catalog.pg_advisory_unlock(42) THEN 1 ELSE 0 END " +
				"WHEN pg_catalog.pg_backend_pid() <> 7 THEN 2 ELSE 0 END)"},
		{"CarrierCount", sqltext.CarrierCount(7, 9),
			"SELECT CASE WHEN pg_catalog.pg_backend_pid() <> 7 THEN -1 ELSE (SELECT pg_catalog.count(*) FROM pg_catalog.pg_locks " +
				"WHERE locktype = 'advisory' AND granted AND pid = 7 AND " + ours + ") END"},
		{"CarrierAlive", sqltext.CarrierAlive(7, 9),
			"SELECT CASE WHEN pg_catalog.pg_backend_pid() <> 7 THEN -1 WHEN pg_catalog.current_setting('pgadvisory.lease', true) = '9' THEN 1 ELSE 0 END"},
		{"CarrierRelease", sqltext.CarrierRelease(7, 9),
			"SELECT 1 FROM pg_catalog.generate_series(1, CASE WHEN " + ours + " THEN CASE WHEN pg_catalog.pg_advisory_unlock_all() IS NULL " +
				"OR pg_catalog.set_config('pgadvisory.lease', '', false) IS NULL THEN 1 ELSE 1 END " + reclaim7 + " ELSE 0 END)"},
		{"CarrierReleaseFrom", sqltext.CarrierReleaseFrom(7, 9),
			"SELECT 1 FROM pg_catalog.generate_series(1, CASE WHEN " + ours + " THEN CASE WHEN pg_catalog.pg_advisory_unlock_all() IS NULL " +
				"OR pg_catalog.set_config('pgadvisory.lease', '', false) IS NULL THEN 1 ELSE 1 END " +
				strings.Replace(reclaim7, " THEN ", " AND EXISTS (SELECT 1 FROM pg_catalog.pg_locks WHERE locktype = 'advisory' AND granted AND pid = 7) THEN ", 1) +
				" ELSE 0 END)"},
		{"CarrierStart", sqltext.CarrierStart,
			"SELECT pg_catalog.pg_backend_pid(), pg_catalog.pg_is_in_recovery(), CASE WHEN COALESCE(pg_catalog.current_setting('pgadvisory.lease', true), '') = '' " +
				"THEN pg_catalog.set_config('pgadvisory.lease', pg_catalog.floor(pg_catalog.random() * 9007199254740992)::pg_catalog.int8::pg_catalog.text, false)::pg_catalog.int8 END"},
		{"LeaseEnd", sqltext.LeaseEnd(7, 9, false, true, k),
			"SELECT 1 FROM pg_catalog.generate_series(1, CASE WHEN " + ours + " THEN CASE WHEN CASE WHEN pg_catalog.pg_advisory_unlock(42) " +
				"THEN pg_catalog.pg_advisory_unlock_all() IS NOT NULL ELSE false END THEN CASE WHEN pg_catalog.set_config('pgadvisory.lease', '', false) IS NULL " +
				"THEN 1 ELSE 1 END ELSE CASE WHEN pg_catalog.set_config('pgadvisory.lease', '', false) IS NULL THEN 0 ELSE 0 END END " + reclaim7 +
				" ELSE 0 END + CASE WHEN pg_catalog.statement_timestamp() = pg_catalog.transaction_timestamp() THEN 0 ELSE 4 END)"},
		{"LeaseEndFrom", sqltext.LeaseEndFrom(7, 9, false, true, k),
			"SELECT 1 FROM pg_catalog.generate_series(1, CASE WHEN " + ours + " THEN CASE WHEN CASE WHEN pg_catalog.pg_advisory_unlock(42) " +
				"THEN pg_catalog.pg_advisory_unlock_all() IS NOT NULL ELSE false END THEN CASE WHEN pg_catalog.set_config('pgadvisory.lease', '', false) IS NULL " +
				"THEN 1 ELSE 1 END ELSE CASE WHEN pg_catalog.set_config('pgadvisory.lease', '', false) IS NULL THEN 0 ELSE 0 END END " +
				strings.Replace(reclaim7, " THEN ", " AND EXISTS (SELECT 1 FROM pg_catalog.pg_locks WHERE locktype = 'advisory' AND pid = 7 AND "+
					"classid = 0::pg_catalog.int8::pg_catalog.oid AND objid = 42::pg_catalog.int8::pg_catalog.oid AND objsubid = 1 AND mode = 'ExclusiveLock' AND granted) THEN ", 1) +
				" ELSE 0 END + CASE WHEN pg_catalog.statement_timestamp() = pg_catalog.transaction_timestamp() THEN 0 ELSE 4 END)"},
		{"Alive", sqltext.Alive(7, 9),
			"SELECT 1 FROM pg_catalog.generate_series(1, CASE WHEN pg_catalog.pg_backend_pid() <> 7 THEN 2 WHEN pg_catalog.current_setting('pgadvisory.lease', true) = '9' THEN 1 ELSE 0 END)"},
		{"Holds", sqltext.Holds(7, false, k, 9),
			"SELECT 1 FROM pg_catalog.generate_series(1, CASE WHEN pg_catalog.pg_backend_pid() <> 7 THEN 2 WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_locks " +
				"WHERE locktype = 'advisory' AND pid = 7 AND classid = 0::pg_catalog.int8::pg_catalog.oid AND objid = 42::pg_catalog.int8::pg_catalog.oid " +
				"AND objsubid = 1 AND mode = 'ExclusiveLock' AND granted) AND pg_catalog.current_setting('pgadvisory.lease', true) = '9' THEN 1 ELSE 0 END)"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, tt.got, tt.want)
		}
	}
}

// reclaim7 is the branch of a pooled lease's or carrier's end that, on
// another backend than 7, ends backend 7 when it is a session of the same
// database, role and client address.
const reclaim7 = "WHEN pg_catalog.pg_backend_pid() <> 7 AND EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity AS a, pg_catalog.pg_stat_activity AS me " +
	"WHERE a.pid = 7 AND me.pid = pg_catalog.pg_backend_pid() AND a.datid = me.datid AND a.usesysid = me.usesysid " +
	"AND a.client_addr IS NOT DISTINCT FROM me.client_addr) THEN CASE WHEN pg_catalog.pg_terminate_backend(7) THEN 2 ELSE 0 END"

// nextToken is how a statement draws a fencing token: the timeline and
// the counter, with synchronous_commit forced for the statement's
// transaction when it is off.
const nextToken = "(SELECT CASE WHEN f.n BETWEEN 1 AND 1099511627775 AND f.l BETWEEN 1 AND 8388607 THEN f.l << 40 | f.n " +
	"ELSE ('advisory: fencing: counter ' || f.n || ' of pgadvisory.fencing_token on timeline ' || f.l || " +
	"' does not fit a fencing token')::pg_catalog.int8 END " +
	"FROM (SELECT CASE WHEN (CASE WHEN pg_catalog.current_setting('synchronous_commit') = 'off' " +
	"THEN pg_catalog.set_config('synchronous_commit', 'local', true) ELSE pg_catalog.current_setting('synchronous_commit') END) " +
	"IS NOT NULL THEN pg_catalog.nextval(COALESCE(pg_catalog.to_regclass('pgadvisory.fencing_token'), " +
	`'pg_catalog."pgadvisory.fencing_token"'::pg_catalog.text::pg_catalog.regclass)) END AS n, ` +
	"('x' || pg_catalog.substr(pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_lsn()), 1, 8))::pg_catalog.bit(32)::pg_catalog.int8 AS l " +
	"OFFSET 0) AS f)"

// TestKeyFromTag checks that a key read back from pg_catalog.pg_locks' columns is
// the key that was locked, in both key spaces and at their extremes.
func TestKeyFromTag(t *testing.T) {
	t.Parallel()
	for _, k := range []sqltext.Key{
		{Bigint: 0}, {Bigint: 42}, {Bigint: -1}, {Bigint: math.MinInt64}, {Bigint: math.MaxInt64}, {Bigint: 1 << 32},
		{Pair: true, A: 1, B: 2}, {Pair: true, A: math.MinInt32, B: -1}, {Pair: true, A: math.MaxInt32, B: math.MinInt32},
	} {
		classid, objid, objsubid := pgTag(k)
		if got := sqltext.KeyFromTag(classid, objid, objsubid); got != k {
			t.Errorf("KeyFromTag(%d, %d, %d) = %+v; want %+v", classid, objid, objsubid, got, k)
		}
	}
}

// pgTag is how pg_catalog.pg_locks shows k, as oids read into int8 (see DESIGN.md).
func pgTag(k sqltext.Key) (classid, objid int64, objsubid int) {
	if k.Pair {
		return int64(uint32(k.A)), int64(uint32(k.B)), 2
	}
	return int64(uint64(k.Bigint) >> 32), int64(uint32(k.Bigint)), 1
}

func TestCarrierTryFencedParams(t *testing.T) {
	t.Parallel()
	s := sqltext.CarrierTryFenced(sqltext.Params, 7, 9, false, sqltext.Key{Pair: true, A: -1, B: 2})
	want := "SELECT CASE WHEN pg_catalog.pg_backend_pid() = 7 AND pg_catalog.current_setting('pgadvisory.lease', true) = '9' THEN CASE WHEN " +
		"pg_catalog.pg_try_advisory_lock($1,$2) THEN t.t ELSE 0 END END FROM (SELECT " + nextToken + " AS t OFFSET 0) AS t"
	if s.Query != want {
		t.Errorf("\n got %s\nwant %s", s.Query, want)
	}
	if len(s.Args) != 2 || s.Args[0] != int32(-1) || s.Args[1] != int32(2) {
		t.Errorf("args %#v; want int32 -1, 2", s.Args)
	}
}
