package main

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/inspect"
)

// sqlHolders reads the sessions that hold advisory locks, in the current
// database, whose pg_locks rows have objsubid $1 and classid $2 or $3: the
// rows of every key that shares a bigint key's high half, or a pair key's
// namespace, with the keys asked about. The caller keeps the keys it asked
// about. It runs only after a lock was refused, to say who holds it.
//
// pg_locks does not record when a lock was granted; the age of the
// holder's session, from backend_start, bounds how long it has held it.
// Without pg_monitor, another role's backend_start reads NULL.
const sqlHolders = `SELECT l.pid, l.classid::pg_catalog.int8, l.objid::pg_catalog.int8, l.objsubid,
	l.mode = 'ShareLock', COALESCE(a.application_name, ''),
	EXTRACT(epoch FROM pg_catalog.clock_timestamp() - a.backend_start)::pg_catalog.float8
FROM pg_catalog.pg_locks l
LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted
	AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())
	AND l.objsubid = $1 AND l.classid::pg_catalog.int8 IN ($2, $3)
ORDER BY a.backend_start NULLS LAST, l.pid`

// A holder is a session that holds a lock exec was refused.
type holder struct {
	pid    int
	app    string
	shared bool
	age    time.Duration // of the session; -1 when the server hides it
}

// maxHolders bounds how many holders a message names.
const maxHolders = 3

// holders returns the sessions that hold one of keys in a mode that
// excludes the mode asked for (any holder for an exclusive lock, exclusive
// holders for a shared one), oldest session first. keys are one key, or
// a semaphore's slots, which share their high half or namespace but for at
// most one step over an int32 boundary.
func holders(ctx context.Context, db *sql.DB, keys []advisory.Key, shared bool) ([]holder, error) {
	want := make(map[advisory.Key]bool, len(keys))
	var subid int16
	var classids []int64
	for _, k := range keys {
		want[k] = true
		var c int64
		if v, ok := k.Int64(); ok {
			subid, c = 1, int64(uint32(uint64(v)>>32))
		} else {
			a, _, _ := k.Pair()
			subid, c = 2, int64(uint32(a))
		}
		if len(classids) == 0 || classids[len(classids)-1] != c {
			classids = append(classids, c)
		}
	}
	if len(classids) == 0 {
		return nil, nil
	}
	if len(classids) == 1 {
		classids = append(classids, classids[0])
	}
	rows, err := db.QueryContext(ctx, sqlHolders, subid, classids[0], classids[len(classids)-1])
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []holder
	for rows.Next() {
		var (
			h              holder
			classid, objid int64
			objsubid       int16
			age            sql.NullFloat64
		)
		if err := rows.Scan(&h.pid, &classid, &objid, &objsubid, &h.shared, &h.app, &age); err != nil {
			return nil, err
		}
		key, err := inspect.DecodeKey(uint32(classid), uint32(objid), objsubid)
		if err != nil || !want[key] || shared && h.shared {
			continue
		}
		h.age = -1
		if age.Valid {
			h.age = time.Duration(age.Float64 * float64(time.Second))
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

// describeHolders says who holds a lock, for at most maxHolders of them:
// `pid 4242 (application_name "billing-api", for at most 2m3s, its
// session's age)`.
func describeHolders(hs []holder) string {
	var parts []string
	for i, h := range hs {
		if i == maxHolders {
			parts = append(parts, fmt.Sprintf("%d more", len(hs)-maxHolders))
			break
		}
		var about []string
		if h.app != "" {
			about = append(about, "application_name "+strconv.Quote(h.app))
		}
		if h.age >= 0 {
			about = append(about, "for at most "+roundDuration(h.age).String()+", its session's age")
		}
		s := "pid " + strconv.Itoa(h.pid)
		if len(about) > 0 {
			s += " (" + strings.Join(about, ", ") + ")"
		}
		parts = append(parts, s)
	}
	switch len(parts) {
	case 0:
		return ""
	case 1:
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}
