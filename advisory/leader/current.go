package leader

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// Info describes the session that leads, as pg_locks and pg_stat_activity
// show it. Without the pg_monitor role (or pg_read_all_stats), the server
// hides some activity columns of other roles' sessions: those fields are
// then empty, and that is not an error.
type Info struct {
	PID             int       // the leader's backend
	ApplicationName string    // its application_name
	User            string    // its role
	ClientAddr      string    // its client's address; empty for a Unix socket
	BackendStart    time.Time // when its session started: it has led at most since then
}

// Since returns how long the leader's session has existed, an upper bound
// on how long it has led; 0 when BackendStart is hidden.
func (i Info) Since() time.Duration {
	if i.BackendStart.IsZero() {
		return 0
	}
	return time.Since(i.BackendStart)
}

// String describes the leader for a log line: its pid, and its
// application name, user and client address when known.
func (i Info) String() string {
	s := fmt.Sprintf("pid %d", i.PID)
	if i.ApplicationName != "" {
		s += fmt.Sprintf(" (%s)", i.ApplicationName)
	}
	return s
}

// currentQuery finds the session holding an exclusive advisory lock on one
// key in the current database. Every function, relation and type it names
// is qualified with pg_catalog, so that the caller's search_path cannot
// redirect it.
const currentQuery = `SELECT l.pid, coalesce(a.application_name, ''), coalesce(a.usename::pg_catalog.text, ''),
	coalesce(pg_catalog.host(a.client_addr), ''), a.backend_start
FROM pg_catalog.pg_locks l LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.mode = 'ExclusiveLock'
  AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())
  AND l.classid::bigint = $1 AND l.objid::bigint = $2 AND l.objsubid = $3
LIMIT 1`

// Current reports who leads key: the session that holds it, and true; or
// false when nobody leads. It costs one round trip on db, takes no lock,
// and needs no privilege. The answer is a snapshot: by the time it
// returns, the leader may have changed.
func Current(ctx context.Context, db *sql.DB, key advisory.Key) (Info, bool, error) {
	if db == nil {
		return Info{}, false, errors.New("leader: nil *sql.DB")
	}
	c, o, s := lockTag(key)
	var i Info
	var start sql.NullTime
	err := db.QueryRowContext(ctx, currentQuery, c, o, s).Scan(&i.PID, &i.ApplicationName, &i.User, &i.ClientAddr, &start)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Info{}, false, nil
	case err != nil:
		return Info{}, false, fmt.Errorf("leader: who leads %s: %w", key, err)
	}
	i.BackendStart = start.Time
	return i, true, nil
}

// lockTag returns how pg_locks shows key: a bigint k as classid = k>>32,
// objid = k&0xffffffff, objsubid = 1; a pair (a, b) as classid = a,
// objid = b, objsubid = 2, each half read as an unsigned oid.
func lockTag(key advisory.Key) (classid, objid int64, subid int) {
	if a, b, ok := key.Pair(); ok {
		return int64(uint32(a)), int64(uint32(b)), 2
	}
	v, _ := key.Int64()
	return int64(uint64(v) >> 32), int64(uint32(v)), 1
}
