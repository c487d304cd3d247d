package advisoryprom

import (
	"context"
	"database/sql"
	"fmt"
	"math"
)

// scrapeSQL reads the whole state a scrape reports in one statement, in
// one pass over pg_locks. The inner query has one row per session, key and
// mode from pg_locks, in the current database, with its session's state
// from pg_stat_activity; the outer one counts those rows by namespace,
// mode and granted, with the oldest hold and the longest wait of each
// group, and the idle holders among the sessions whose first row (first)
// falls in the group, so that the groups' counts add up to the number of
// sessions. A session in state 'idle' is outside any transaction, so every
// advisory lock it holds is a session lock. A session waits for at most
// one lock, so the waiting rows are the blocked sessions.
//
// ns is classid for a pair key (objsubid 2), the key's first half as an
// oid, and NULL for a bigint key. waitstart is read through to_jsonb, NULL
// on servers older than PostgreSQL 14, where pg_locks has no such column,
// and for a moment after a wait begins; the wait is then timed from the
// start of the waiting statement.
//
// Every function, relation and cast type is qualified with pg_catalog, so
// that the caller's search_path cannot redirect it.
const scrapeSQL = `SELECT ns, shared, granted, pg_catalog.count(*), ` +
	`pg_catalog.max(in_state) FILTER (WHERE granted), pg_catalog.max(waited), ` +
	`pg_catalog.count(*) FILTER (WHERE first AND state = 'idle'), ` +
	`pg_catalog.max(in_state) FILTER (WHERE state = 'idle') ` +
	`FROM (SELECT ` +
	`CASE WHEN l.objsubid = 2 THEN l.classid::pg_catalog.int8 END AS ns, ` +
	`l.mode = 'ShareLock' AS shared, l.granted, a.state, ` +
	`extract(epoch FROM pg_catalog.clock_timestamp() - a.state_change)::pg_catalog.float8 AS in_state, ` +
	`CASE WHEN NOT l.granted THEN extract(epoch FROM pg_catalog.clock_timestamp() - ` +
	`coalesce((pg_catalog.to_jsonb(l) ->> 'waitstart')::pg_catalog.timestamptz, a.query_start))::pg_catalog.float8 END AS waited, ` +
	`pg_catalog.row_number() OVER (PARTITION BY l.pid) = 1 AS first ` +
	`FROM pg_catalog.pg_locks l ` +
	`LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid ` +
	`WHERE l.locktype = 'advisory' ` +
	`AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())) s ` +
	`GROUP BY ns, shared, granted`

// group is one row of scrapeSQL: the locks of one namespace ID (or of
// bigint keys), mode and state.
type group struct {
	ns          int32 // the pair keys' first half; meaningless when bigint
	bigint      bool
	shared      bool
	granted     bool
	count       int64
	maxHold     sql.NullFloat64 // the oldest hold's age in seconds, for holders
	maxWait     sql.NullFloat64 // the longest wait in seconds, for waiters
	idleHolders int64           // idle sessions whose first row is in the group
	longestIdle sql.NullFloat64 // the longest idle holder's time in state
}

// read runs scrapeSQL on db.
func read(ctx context.Context, db *sql.DB) ([]group, error) {
	rows, err := db.QueryContext(ctx, scrapeSQL)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var groups []group
	for rows.Next() {
		var (
			g  group
			ns sql.NullInt64
		)
		if err := rows.Scan(&ns, &g.shared, &g.granted, &g.count, &g.maxHold, &g.maxWait, &g.idleHolders, &g.longestIdle); err != nil {
			return nil, err
		}
		if ns.Valid && (ns.Int64 < 0 || ns.Int64 > math.MaxUint32) {
			return nil, fmt.Errorf("pg_locks classid %d out of range", ns.Int64)
		}
		g.ns, g.bigint = int32(uint32(ns.Int64)), !ns.Valid
		groups = append(groups, g)
	}
	return groups, rows.Err()
}
