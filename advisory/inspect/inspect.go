package inspect

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/keyspace"
)

// Lock describes one advisory lock held or awaited by one session, as
// [Locks] reads it from pg_locks and pg_stat_activity. Without the
// pg_monitor role (or pg_read_all_stats), the server hides the activity of
// other roles' sessions: their State, ClientAddr, XactStart, StateChange
// and Query are then empty, and Key, Shared, Granted, PID, User,
// ApplicationName and BlockedBy are still reported.
type Lock struct {
	Key       advisory.Key // the lock's key, decoded with [DecodeKey]
	Namespace string       // the name of Key's namespace, with [WithRegistry]; "" if none
	Shared    bool         // a shared lock; false for an exclusive one
	Granted   bool         // held; false while the session waits for it

	PID             int    // the backend's process ID; 0 for a prepared transaction
	Database        string // the database the lock belongs to
	ApplicationName string // the session's application_name; "" if it set none
	User            string // the role the session logged in as
	ClientAddr      string // the client's IP address; "" over a Unix socket
	State           string // "active", "idle in transaction", "idle", ...
	Query           string // the session's current or last statement

	XactStart   time.Time     // when the session's transaction began; zero outside one
	StateChange time.Time     // when State last changed
	WaitStart   time.Time     // when the wait began; zero when granted, and before PostgreSQL 14
	Waited      time.Duration // how long it has waited, from WaitStart to the query's time
	BlockedBy   []int         // while waiting, the PIDs it waits for, ascending (pg_blocking_pids)
}

// Mode returns "shared" or "exclusive".
func (l Lock) Mode() string {
	if l.Shared {
		return "shared"
	}
	return "exclusive"
}

// String describes the lock on one line, such as
// `pid 4242 (billing-api) holds exclusive 7:1 [billing]` or
// `pid 4243 waits 1.5s for shared 42, blocked by 4242`.
func (l Lock) String() string {
	var b strings.Builder
	b.WriteString(pidLabel(l.PID, l.ApplicationName))
	if l.Granted {
		b.WriteString(" holds ")
	} else {
		b.WriteString(" ")
		b.WriteString(l.waits())
		b.WriteString(" for ")
	}
	b.WriteString(l.what())
	if len(l.BlockedBy) > 0 {
		b.WriteString(", blocked by ")
		b.WriteString(pidList(l.BlockedBy))
	}
	return b.String()
}

// what renders the mode and the key: `exclusive 7:1 [billing]`.
func (l Lock) what() string {
	s := l.Mode() + " " + l.Key.String()
	if l.Namespace != "" {
		s += " [" + l.Namespace + "]"
	}
	return s
}

// waits renders "waits" or "waits 1.5s".
func (l Lock) waits() string {
	if l.Waited <= 0 {
		return "waits"
	}
	return "waits " + roundDuration(l.Waited).String()
}

// roundDuration keeps a duration readable in a log line.
func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(time.Millisecond)
	}
	return d
}

// errNilDB is returned for a nil *sql.DB.
var errNilDB = errors.New("inspect: nil *sql.DB")

// fail reports err, from the query of [Locks] under ctx. An error that
// came as ctx ended also matches ctx's error.
func fail(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		return fmt.Errorf("inspect: %w: %w", ctxErr, err)
	}
	return fmt.Errorf("inspect: %w", err)
}

// pidLabel names a session: `pid 4242 (billing-api)`, or
// "prepared transaction" for pid 0.
func pidLabel(pid int, app string) string {
	if pid == 0 {
		return "prepared transaction"
	}
	s := "pid " + strconv.Itoa(pid)
	if app != "" {
		s += " (" + app + ")"
	}
	return s
}

// pidList renders PIDs as "4242, 4250".
func pidList(pids []int) string {
	parts := make([]string, len(pids))
	for i, p := range pids {
		parts[i] = strconv.Itoa(p)
	}
	return strings.Join(parts, ", ")
}

// An Option changes what [Locks] reports.
type Option func(*options)

// options holds what the Options of one call set.
type options struct {
	registry *keyspace.Registry
	allDBs   bool
}

// WithRegistry makes [Locks] fill in [Lock].Namespace from r.
func WithRegistry(r *keyspace.Registry) Option {
	return func(o *options) { o.registry = r }
}

// AllDatabases makes [Locks] report the advisory locks of every database
// on the server, not only the current one. Advisory locks of two databases
// never conflict, even on the same key.
func AllDatabases() Option {
	return func(o *options) { o.allDBs = true }
}

// inspectSQL reads every advisory lock with its session's activity. It
// reads waitstart through to_jsonb, which yields NULL on servers older than
// PostgreSQL 14, where pg_locks has no such column. %s is one of the
// filters below.
//
// Every function, relation and type it names is qualified with
// pg_catalog, so that the caller's search_path cannot redirect it.
const inspectSQL = `SELECT l.classid::pg_catalog.int8, l.objid::pg_catalog.int8, l.objsubid::pg_catalog.int4, l.mode, l.granted, ` +
	`l.pid, d.datname::pg_catalog.text, a.application_name, a.usename::pg_catalog.text, pg_catalog.host(a.client_addr), a.state, ` +
	`NULLIF(a.query, '<insufficient privilege>'), a.xact_start, a.state_change, w.waitstart, ` +
	`extract(epoch FROM pg_catalog.clock_timestamp() - w.waitstart)::pg_catalog.float8, ` +
	`CASE WHEN NOT l.granted THEN pg_catalog.pg_blocking_pids(l.pid)::pg_catalog.text END ` +
	`FROM pg_catalog.pg_locks l ` +
	`CROSS JOIN LATERAL (SELECT (pg_catalog.to_jsonb(l) ->> 'waitstart')::pg_catalog.timestamptz AS waitstart) w ` +
	`LEFT JOIN pg_catalog.pg_database d ON d.oid = l.database ` +
	`LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid ` +
	`WHERE l.locktype = 'advisory'%s`

// The filters of inspectSQL.
const (
	inspectThisDB = ` AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())`
	inspectAllDBs = ``
)

// Locks returns the advisory locks held or awaited in the current
// database (every database with [AllDatabases]), one per session, key and
// mode, sorted by key, then holders before waiters, then PID. It runs one
// query, joining pg_locks with pg_stat_activity, and needs no privilege:
// without pg_monitor some fields of other roles' sessions are empty, as
// [Lock] says, and that is not an error.
//
// The answer is a snapshot: locks come and go as it is read. Pass the
// result to [WaitGraph] to see who blocks whom.
func Locks(ctx context.Context, db *sql.DB, opts ...Option) ([]Lock, error) {
	if db == nil {
		return nil, errNilDB
	}
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	filter := inspectThisDB
	if o.allDBs {
		filter = inspectAllDBs
	}
	rows, err := db.QueryContext(ctx, fmt.Sprintf(inspectSQL, filter))
	if err != nil {
		return nil, fail(ctx, err)
	}
	defer rows.Close()
	var locks []Lock
	for rows.Next() {
		l, err := scanLock(rows)
		if err != nil {
			return nil, fmt.Errorf("inspect: %w", err)
		}
		if o.registry != nil {
			if ns, ok := o.registry.Lookup(l.Key); ok {
				l.Namespace = ns.Name
			}
		}
		locks = append(locks, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fail(ctx, err)
	}
	slices.SortStableFunc(locks, compareLocks)
	return locks, nil
}

// compareLocks orders locks by key, holders first, then by PID, mode and
// database.
func compareLocks(a, b Lock) int {
	if c := a.Key.Compare(b.Key); c != 0 {
		return c
	}
	if a.Granted != b.Granted {
		if a.Granted {
			return -1
		}
		return 1
	}
	if a.PID != b.PID {
		return a.PID - b.PID
	}
	if a.Shared != b.Shared {
		if a.Shared {
			return 1
		}
		return -1
	}
	return strings.Compare(a.Database, b.Database)
}

// scanLock reads one row of inspectSQL.
func scanLock(rows *sql.Rows) (Lock, error) {
	var (
		l                                     Lock
		classid, objid, objsubid              int64
		mode                                  string
		pid                                   sql.NullInt64
		dbName, app, user, addr, state, query sql.NullString
		xactStart, stateChange, waitStart     sql.NullTime
		waited                                sql.NullFloat64
		blocking                              sql.NullString
	)
	err := rows.Scan(&classid, &objid, &objsubid, &mode, &l.Granted,
		&pid, &dbName, &app, &user, &addr, &state,
		&query, &xactStart, &stateChange, &waitStart,
		&waited, &blocking)
	if err != nil {
		return Lock{}, err
	}
	if classid < 0 || classid > math.MaxUint32 || objid < 0 || objid > math.MaxUint32 ||
		objsubid < math.MinInt16 || objsubid > math.MaxInt16 {
		return Lock{}, fmt.Errorf("%w: classid %d, objid %d, objsubid %d out of range", advisory.ErrBadKey, classid, objid, objsubid)
	}
	if l.Key, err = DecodeKey(uint32(classid), uint32(objid), int16(objsubid)); err != nil {
		return Lock{}, err
	}
	switch mode {
	case "ShareLock":
		l.Shared = true
	case "ExclusiveLock":
	default:
		return Lock{}, fmt.Errorf("unexpected advisory lock mode %q", mode)
	}
	l.PID = int(pid.Int64)
	l.Database = dbName.String
	l.ApplicationName = app.String
	l.User = user.String
	l.ClientAddr = addr.String
	l.State = state.String
	l.Query = query.String
	l.XactStart = xactStart.Time
	l.StateChange = stateChange.Time
	if !l.Granted {
		l.WaitStart = waitStart.Time
		if waited.Valid && waited.Float64 > 0 {
			l.Waited = time.Duration(waited.Float64 * float64(time.Second))
		}
		if l.BlockedBy, err = parseIntArray(blocking.String); err != nil {
			return Lock{}, err
		}
	}
	return l, nil
}

// parseIntArray reads the text form of an int[], such as "{4242,4250}",
// into ascending ints. "" (NULL) and "{}" give nil.
func parseIntArray(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	inner, okPrefix := strings.CutPrefix(s, "{")
	inner, okSuffix := strings.CutSuffix(inner, "}")
	if !okPrefix || !okSuffix {
		return nil, fmt.Errorf("malformed int array %q", s)
	}
	if inner == "" {
		return nil, nil
	}
	parts := strings.Split(inner, ",")
	out := make([]int, 0, len(parts))
	for _, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, fmt.Errorf("malformed int array %q", s)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// DecodeKey rebuilds a key from the classid, objid and objsubid columns
// of an advisory lock's row in pg_locks (classid and objid are oids, that
// is, uint32). objsubid 1 marks a bigint key k, shown as classid = k>>32
// and objid = k&0xffffffff; objsubid 2 marks a pair (a, b), shown as
// classid = a and objid = b, both as unsigned. Any other objsubid gives an
// error matching [advisory.ErrBadKey].
//
// A key taken with a bigint never equals one taken with a pair, even when
// classid and objid match: objsubid tells them apart, and the server keeps
// them apart.
func DecodeKey(classid, objid uint32, objsubid int16) (advisory.Key, error) {
	switch objsubid {
	case 1:
		return advisory.Int64Key(int64(uint64(classid)<<32 | uint64(objid))), nil
	case 2:
		return advisory.PairKey(int32(classid), int32(objid)), nil
	}
	return advisory.Key{}, fmt.Errorf("%w: pg_locks objsubid %d is neither 1 (bigint) nor 2 (int, int)", advisory.ErrBadKey, objsubid)
}
