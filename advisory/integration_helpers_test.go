package advisory_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// This file holds what the integration tests share: keys no other test
// uses, and the queries that read from pg_locks and pg_stat_activity what a
// session holds.

// pgAllDrivers are the drivers the ghost-lock tests run on: both drivers,
// and pgx with a context watcher that sends a cancel request and keeps the
// session.
var pgAllDrivers = []string{pgtest.DriverPQ, pgtest.DriverPGX, pgtest.DriverPGXCancel}

// pgDeadlineWait is the timeout of a context meant to end while a call
// waits for a lock. It is generous, so that even on a loaded machine the
// call has nearly always reached the server when the deadline passes; no
// assertion relies on that (see pgEndWhileWaiting).
const pgDeadlineWait = 3 * time.Second

// pgKeys hands out keys that no other test uses, even when tests of other
// packages share the server: each pgKeys starts from its own random base.
type pgKeys struct {
	base int64
	hi   int32
	n    atomic.Int64
}

// newPGKeys returns a pgKeys with a random base.
func newPGKeys() *pgKeys {
	hi := mrand.Int32N(1<<30) + 1<<20
	if mrand.IntN(2) == 0 {
		hi = -hi
	}
	return &pgKeys{
		// Bases are multiples of 2^24 anywhere in ±2^61, so that keys
		// cover negative values and both halves of the bigint.
		base: (mrand.Int64N(1<<38) - 1<<37) << 24,
		hi:   hi,
	}
}

// next returns a new bigint key. Successive keys sort in the order they
// were made.
func (g *pgKeys) next() advisory.Key { return advisory.Int64Key(g.base + g.n.Add(1)) }

// nextPair returns a new pair key.
func (g *pgKeys) nextPair() advisory.Key { return advisory.PairKey(g.hi, int32(g.n.Add(1))) }

// pgLock is one advisory row of pg_locks.
type pgLock struct {
	pid     int
	key     advisory.Key
	shared  bool // ShareLock; else ExclusiveLock
	granted bool
}

func (l pgLock) String() string {
	mode := "exclusive"
	if l.shared {
		mode = "shared"
	}
	state := "granted"
	if !l.granted {
		state = "waiting"
	}
	return fmt.Sprintf("pid %d %s %s %s", l.pid, l.key, mode, state)
}

// pgLockTag returns how pg_locks shows key: a bigint k as classid = k>>32,
// objid = k&0xffffffff, objsubid = 1; a pair (a, b) as classid = a,
// objid = b, objsubid = 2, each half read as an unsigned oid.
func pgLockTag(k advisory.Key) (classid, objid int64, subid int) {
	if a, b, ok := k.Pair(); ok {
		return int64(uint32(a)), int64(uint32(b)), 2
	}
	v, _ := k.Int64()
	return int64(uint64(v) >> 32), int64(uint32(v)), 1
}

// pgKeyOfTag is the inverse of pgLockTag.
func pgKeyOfTag(classid, objid int64, subid int) advisory.Key {
	if subid == 2 {
		return advisory.PairKey(int32(uint32(classid)), int32(uint32(objid)))
	}
	return advisory.Int64Key(int64(uint64(classid)<<32 | uint64(uint32(objid))))
}

// pgLocksQuery reads the advisory locks of the current database.
const pgLocksQuery = `SELECT coalesce(l.pid, 0), l.classid::bigint, l.objid::bigint, l.objsubid::int, l.mode, l.granted
FROM pg_locks l
WHERE l.locktype = 'advisory'
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`

// pgQueryLocks runs pgLocksQuery with a further condition.
func pgQueryLocks(ctx context.Context, db *sql.DB, where string, args ...any) ([]pgLock, error) {
	rows, err := db.QueryContext(ctx, pgLocksQuery+where+" ORDER BY 1, 2, 3, 4", args...)
	if err != nil {
		return nil, fmt.Errorf("pg_locks: %w", err)
	}
	defer rows.Close()
	var out []pgLock
	for rows.Next() {
		var l pgLock
		var classid, objid int64
		var subid int
		var mode string
		if err := rows.Scan(&l.pid, &classid, &objid, &subid, &mode, &l.granted); err != nil {
			return nil, fmt.Errorf("pg_locks: %w", err)
		}
		l.key = pgKeyOfTag(classid, objid, subid)
		l.shared = mode == "ShareLock"
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pg_locks: %w", err)
	}
	return out, nil
}

// pgQueryLocksOfPID returns the advisory locks that backend pid holds or waits
// for.
func pgQueryLocksOfPID(ctx context.Context, db *sql.DB, pid int) ([]pgLock, error) {
	return pgQueryLocks(ctx, db, " AND l.pid = $1", pid)
}

// pgQueryLocksOfKey returns every session's hold on, or wait for, key.
func pgQueryLocksOfKey(ctx context.Context, db *sql.DB, key advisory.Key) ([]pgLock, error) {
	c, o, s := pgLockTag(key)
	return pgQueryLocks(ctx, db, " AND l.classid::bigint = $1 AND l.objid::bigint = $2 AND l.objsubid = $3", c, o, s)
}

// pgQueryLocksOfApp returns the advisory locks of every session whose
// application_name is app.
func pgQueryLocksOfApp(ctx context.Context, db *sql.DB, app string) ([]pgLock, error) {
	return pgQueryLocks(ctx, db, " AND l.pid IN (SELECT pid FROM pg_stat_activity WHERE application_name = $1)", app)
}

// pgLocksOfPID is pgQueryLocksOfPID for the test goroutine.
func pgLocksOfPID(t *testing.T, db *sql.DB, pid int) []pgLock {
	t.Helper()
	locks, err := pgQueryLocksOfPID(context.Background(), db, pid)
	if err != nil {
		t.Fatal(err)
	}
	return locks
}

// pgLocksOfKey is pgQueryLocksOfKey for the test goroutine.
func pgLocksOfKey(t *testing.T, db *sql.DB, key advisory.Key) []pgLock {
	t.Helper()
	locks, err := pgQueryLocksOfKey(context.Background(), db, key)
	if err != nil {
		t.Fatal(err)
	}
	return locks
}

// pgHoldsErr reports nil if backend pid holds key, granted, in the given
// mode, and an error naming what it holds otherwise.
func pgHoldsErr(ctx context.Context, db *sql.DB, pid int, key advisory.Key, shared bool) error {
	locks, err := pgQueryLocksOfPID(ctx, db, pid)
	if err != nil {
		return err
	}
	for _, l := range locks {
		if l.key == key && l.shared == shared && l.granted {
			return nil
		}
	}
	return fmt.Errorf("backend %d does not hold %s (shared=%v); pg_locks shows %v", pid, key, shared, locks)
}

// pgRequireHolds fails t unless backend pid holds key in the given mode.
func pgRequireHolds(t *testing.T, db *sql.DB, pid int, key advisory.Key, shared bool) {
	t.Helper()
	if err := pgHoldsErr(context.Background(), db, pid, key, shared); err != nil {
		t.Fatal(err)
	}
}

// pgRequireNoLocks fails t if backend pid holds or waits for any advisory
// lock.
func pgRequireNoLocks(t *testing.T, db *sql.DB, pid int) {
	t.Helper()
	if locks := pgLocksOfPID(t, db, pid); len(locks) > 0 {
		t.Fatalf("backend %d still has advisory locks: %v", pid, locks)
	}
}

// pgRequireFree fails t if any session holds or waits for key.
func pgRequireFree(t *testing.T, db *sql.DB, key advisory.Key) {
	t.Helper()
	if locks := pgLocksOfKey(t, db, key); len(locks) > 0 {
		t.Fatalf("key %s is not free: %v", key, locks)
	}
}

// pgAwaitWaiting returns once backend pid waits for key, or with an error
// if done receives first (the call that should wait returned) or the wait
// does not show.
func pgAwaitWaiting(db *sql.DB, pid int, key advisory.Key, done <-chan struct{}) error {
	err := pgtest.Poll(200*time.Microsecond, func() (bool, error) {
		select {
		case <-done:
			return false, errors.New("the call returned instead of waiting")
		default:
		}
		locks, err := pgQueryLocksOfPID(context.Background(), db, pid)
		if err != nil {
			return false, err
		}
		for _, l := range locks {
			if l.key == key && !l.granted {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for backend %d to wait for %s: %w", pid, key, err)
	}
	return nil
}

// pgWaitWaiting is pgAwaitWaiting for the test goroutine, without a done
// channel.
func pgWaitWaiting(t *testing.T, db *sql.DB, pid int, key advisory.Key) {
	t.Helper()
	if err := pgAwaitWaiting(db, pid, key, nil); err != nil {
		t.Fatal(err)
	}
}

// pgEndWhileWaiting runs call, which should wait for key held by another
// session, in a goroutine, with a context that ends with want
// (context.Canceled or context.DeadlineExceeded); it returns whether
// pg_locks showed backend pid waiting for key before the context ended,
// and call's error. The goroutine has ended when pgEndWhileWaiting returns.
//
// With context.Canceled the context is cancelled only once the wait
// shows, so the cancel surely interrupts a wait on the server, and waited
// is true; t fails if the wait never shows. With context.DeadlineExceeded
// the context times out after pgDeadlineWait whether or not the wait
// showed by then: a deadline cannot wait for the observation, so waited
// may be false, and callers assert what depends on the wait only when it
// is true. The session of pid should be warm (connected, and idle in the
// pool or in an open transaction), so that the call reaches the server at
// once.
func pgEndWhileWaiting(t *testing.T, obs *sql.DB, pid int, key advisory.Key, want error,
	call func(ctx context.Context) error) (waited bool, err error) {
	t.Helper()
	var ctx context.Context
	var cancel context.CancelFunc
	switch want {
	case context.Canceled:
		ctx, cancel = context.WithCancel(context.Background())
	case context.DeadlineExceeded:
		ctx, cancel = context.WithTimeout(context.Background(), pgDeadlineWait)
	default:
		t.Fatalf("pgEndWhileWaiting: want %v; want context.Canceled or context.DeadlineExceeded", want)
	}
	defer cancel()
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		err = call(ctx)
	}()
	werr := pgAwaitWaiting(obs, pid, key, returned)
	if want == context.Canceled {
		cancel()
	}
	<-returned
	switch {
	case werr == nil:
		return true, err
	case want == context.Canceled:
		t.Fatalf("%v (the call returned %v)", werr, err)
	}
	t.Logf("the deadline passed before backend %d was seen waiting for %s (%v); checking the error only", pid, key, werr)
	return false, err
}

// pgAwaitGone returns once backend pid has ended, and fails if it has not
// ended within pgtest.PollTimeout. A session ends after it released its
// locks, so a pid that is gone holds nothing. Unlike pgtest.AwaitGone it
// needs no testing.TB, so a goroutine other than the test's may call it,
// and its error names the advisory locks, keys and all, that pid still has.
func pgAwaitGone(db *sql.DB, pid int) error {
	var last error
	err := pgtest.Poll(2*time.Millisecond, func() (bool, error) {
		var n int
		// A query can fail while the session ends, as when it held so
		// many locks that the table was full: try again.
		last = db.QueryRowContext(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&n)
		return last == nil && n == 0, nil
	})
	if err != nil && last != nil {
		err = fmt.Errorf("%w (last query: %v)", err, last)
	}
	if err != nil {
		locks, _ := pgQueryLocksOfPID(context.Background(), db, pid)
		return fmt.Errorf("backend %d did not end (advisory locks %v): %w", pid, locks, err)
	}
	return nil
}

// pgWaitGone is pgAwaitGone for the test goroutine, and checks that pg_locks
// shows nothing for pid.
func pgWaitGone(t *testing.T, db *sql.DB, pid int) {
	t.Helper()
	if err := pgAwaitGone(db, pid); err != nil {
		t.Fatal(err)
	}
	pgRequireNoLocks(t, db, pid)
}

// pgShow returns the value of a setting as the session behind q sees it.
func pgShow(t *testing.T, q pgtest.Querier, name string) string {
	t.Helper()
	var v string
	if err := q.QueryRowContext(context.Background(), "SHOW "+name).Scan(&v); err != nil {
		t.Fatalf("SHOW %s: %v", name, err)
	}
	return v
}

// pgRequireDiscarded fails t unless conn was closed for good: database/sql
// answers sql.ErrConnDone without reaching the server.
func pgRequireDiscarded(t *testing.T, conn *sql.Conn) {
	t.Helper()
	if _, err := conn.ExecContext(context.Background(), "SELECT 1"); !errors.Is(err, sql.ErrConnDone) {
		t.Fatalf("conn after a call in doubt: Exec err = %v, want sql.ErrConnDone", err)
	}
}

// pgDiscard closes the session behind conn instead of returning it to
// the pool, as advisory does when a session's locks are in doubt.
func pgDiscard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
}

// pgOpenOne opens a *sql.DB on tg's server and driver with at most one
// connection, so that consecutive users share one session. It is closed at
// t's cleanup.
func pgOpenOne(t *testing.T, tg pgtest.Target) *sql.DB {
	t.Helper()
	db := tg.Server.Open(t, tg.Driver)
	db.SetMaxOpenConns(1)
	return db
}

// pgSessionState returns pg_stat_activity.state of backend pid.
func pgSessionState(t *testing.T, db *sql.DB, pid int) string {
	t.Helper()
	var state sql.NullString
	err := db.QueryRowContext(context.Background(), "SELECT state FROM pg_stat_activity WHERE pid = $1", pid).Scan(&state)
	if err != nil {
		t.Fatalf("state of backend %d: %v", pid, err)
	}
	return state.String
}

// pgSQLState returns the SQLSTATE the driver's error in err carries, or "".
func pgSQLState(err error) string {
	var e interface{ SQLState() string }
	if errors.As(err, &e) {
		return e.SQLState()
	}
	return ""
}

// pgErrTail shortens the message of an error about many keys, whose list
// fills the middle, to its start and its end, where the driver's error is.
func pgErrTail(err error) string {
	msg := err.Error()
	if len(msg) <= 400 {
		return msg
	}
	return msg[:100] + " … " + msg[len(msg)-300:]
}

// pgArg renders a bigint key for hand-written SQL.
func pgArg(k advisory.Key) string {
	v, ok := k.Int64()
	if !ok {
		panic("pgArg: pair key " + k.String())
	}
	return strconv.FormatInt(v, 10)
}

// pgRequireNoAppLocks fails t if a session of app still holds an advisory
// lock once every session that was closed has ended, or if one is idle in
// a transaction.
func pgRequireNoAppLocks(t *testing.T, obs *sql.DB, app string) {
	t.Helper()
	var last []pgLock
	err := pgtest.Poll(5*time.Millisecond, func() (bool, error) {
		locks, err := pgQueryLocksOfApp(context.Background(), obs, app)
		last = locks
		return len(locks) == 0, err
	})
	if err != nil {
		t.Fatalf("sessions of the pool still hold advisory locks: %v: %v", last, err)
	}
	var idleInTx int
	if err := obs.QueryRowContext(context.Background(),
		"SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND state LIKE 'idle in transaction%'", app).Scan(&idleInTx); err != nil {
		t.Fatal(err)
	}
	if idleInTx > 0 {
		t.Fatalf("%d sessions of the pool are idle in a transaction", idleInTx)
	}
}
