package pgtest

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"
)

// PollTimeout bounds every wait of [Poll] and the Await helpers for the
// server to show a state. It is generous: a session that a client
// dropped usually ends within tens of milliseconds, but on a loaded
// machine it can take seconds. A test only waits this long when it is
// about to fail.
const PollTimeout = 30 * time.Second

// pollInterval is how often the Await helpers ask the server.
const pollInterval = 5 * time.Millisecond

// Poll calls cond every interval until it reports true or an error, and
// returns that error. It returns an error of its own if cond has not
// reported true within [PollTimeout]. Poll does not need a testing.TB, so
// a goroutine other than the test's may call it; on the test's own
// goroutine, [Await] fails the test itself.
func Poll(interval time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(PollTimeout)
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still not so after %v", PollTimeout)
		}
		time.Sleep(interval)
	}
}

// Await calls cond until it reports true and returns then; it fails tb,
// naming what it waited for, if cond returns an error or has not reported
// true within [PollTimeout]. It asks again after 1 ms, then ever less
// often, up to every 16 ms. A test waits for a state with Await, never
// with a sleep or a loop of its own: it waits only as long as the state
// takes to come, on a loaded machine too, and says what never came. what
// completes "waiting for", as in "the session to end". Call Await from the
// test's goroutine, as tb.Fatal requires; another goroutine uses [Poll].
func Await(tb testing.TB, what string, cond func() (bool, error)) {
	tb.Helper()
	start := time.Now()
	interval := time.Millisecond
	for {
		ok, err := cond()
		switch {
		case err != nil:
			tb.Fatalf("pgtest: waiting for %s: %v", what, err)
		case ok:
			return
		case time.Since(start) > PollTimeout:
			tb.Fatalf("pgtest: waiting for %s: still not so after %v", what, PollTimeout)
		}
		time.Sleep(interval)
		interval = min(2*interval, maxAwaitInterval)
	}
}

// maxAwaitInterval is how often [Await] asks at most.
const maxAwaitInterval = 16 * time.Millisecond

// A Key is an advisory lock key as package advisory's Key gives it: a pair
// of int32s or a bigint. pgtest does not import advisory, so that
// advisory's own tests may use it.
type Key interface {
	Pair() (k1, k2 int32, ok bool)
	Int64() (v int64, ok bool)
}

// A Lock is one session's hold on, or wait for, an advisory lock, as
// pg_locks shows it.
type Lock struct {
	PID     int
	Shared  bool // ShareLock; else ExclusiveLock
	Granted bool // else waiting
}

func (l Lock) String() string {
	mode, state := "exclusive", "granted"
	if l.Shared {
		mode = "shared"
	}
	if !l.Granted {
		state = "waiting"
	}
	return fmt.Sprintf("pid %d %s %s", l.PID, mode, state)
}

// lockTag returns how pg_locks shows key: a bigint k as classid = k>>32,
// objid = k&0xffffffff, objsubid = 1; a pair (a, b) as classid = a,
// objid = b, objsubid = 2, each half read as an unsigned oid.
func lockTag(key Key) (classid, objid int64, subid int) {
	if a, b, ok := key.Pair(); ok {
		return int64(uint32(a)), int64(uint32(b)), 2
	}
	v, _ := key.Int64()
	return int64(uint64(v) >> 32), int64(uint32(v)), 1
}

// locksOfKeyQuery reads the holds on, and waits for, one advisory key in
// the current database.
const locksOfKeyQuery = `SELECT coalesce(pid, 0), mode, granted FROM pg_locks
WHERE locktype = 'advisory'
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = $3
ORDER BY 1`

// LocksOf returns every session's hold on, or wait for, key in the
// database that db connects to.
func LocksOf(ctx context.Context, db *sql.DB, key Key) ([]Lock, error) {
	c, o, s := lockTag(key)
	return queryLocks(ctx, db, locksOfKeyQuery, c, o, s)
}

// queryLocks runs query, which reads pid, mode and granted from pg_locks,
// and returns its rows.
func queryLocks(ctx context.Context, db *sql.DB, query string, args ...any) ([]Lock, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("pg_locks: %w", err)
	}
	defer rows.Close()
	var out []Lock
	for rows.Next() {
		var l Lock
		var mode string
		if err := rows.Scan(&l.PID, &mode, &l.Granted); err != nil {
			return nil, fmt.Errorf("pg_locks: %w", err)
		}
		l.Shared = mode == "ShareLock"
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pg_locks: %w", err)
	}
	return out, nil
}

// AwaitFree returns once no session holds or waits for key, and fails tb
// if that takes longer than [PollTimeout]. A client that goes away leaves
// its session to the server for a moment: the session, and its locks,
// end shortly after the client sees its call fail, so a test that checks
// that the lock is free again polls with AwaitFree rather than looking
// once.
func AwaitFree(tb testing.TB, db *sql.DB, key Key) {
	tb.Helper()
	var last []Lock
	err := Poll(pollInterval, func() (bool, error) {
		var err error
		last, err = LocksOf(context.Background(), db, key)
		return len(last) == 0, err
	})
	if err != nil {
		tb.Fatalf("pgtest: key %v did not become free: %v (pg_locks shows %v)", key, err, last)
	}
}

// AwaitHolder returns the pid of the session that holds key, once one
// does, and fails tb if none does within [PollTimeout].
func AwaitHolder(tb testing.TB, db *sql.DB, key Key) int {
	tb.Helper()
	var last []Lock
	pid := 0
	err := Poll(pollInterval, func() (bool, error) {
		var err error
		last, err = LocksOf(context.Background(), db, key)
		for _, l := range last {
			if l.Granted {
				pid = l.PID
				return true, err
			}
		}
		return false, err
	})
	if err != nil {
		tb.Fatalf("pgtest: no session holds key %v: %v (pg_locks shows %v)", key, err, last)
	}
	return pid
}

// AwaitWaiting returns once some session waits for key, not yet granted,
// and fails tb if none does within [PollTimeout].
func AwaitWaiting(tb testing.TB, db *sql.DB, key Key) {
	tb.Helper()
	awaitWaiting(tb, db, key, pollInterval)
}

// AwaitQueued is [AwaitWaiting] for a benchmark of how soon a waiter gets
// a released key. It asks the server again at once, not every few
// milliseconds, and returns settle after it first sees the waiter queued.
// So every waiter is released the same time after it joined the queue,
// however many statements it sent before: with a pause between looks, a
// waiter that sends one statement is often queued by the first look and
// released while its process is still running, and one that sends three
// is not, and sleeps until the next.
func AwaitQueued(tb testing.TB, db *sql.DB, key Key, settle time.Duration) {
	tb.Helper()
	awaitWaiting(tb, db, key, 0)
	time.Sleep(settle)
}

// awaitWaiting is [AwaitWaiting], asking every interval.
func awaitWaiting(tb testing.TB, db *sql.DB, key Key, interval time.Duration) {
	tb.Helper()
	var last []Lock
	err := Poll(interval, func() (bool, error) {
		var err error
		last, err = LocksOf(context.Background(), db, key)
		for _, l := range last {
			if !l.Granted {
				return true, err
			}
		}
		return false, err
	})
	if err != nil {
		tb.Fatalf("pgtest: no session waits for key %v: %v (pg_locks shows %v)", key, err, last)
	}
}

// AwaitGone returns once backend pid has ended, and fails tb if it has
// not within [PollTimeout]. A session ends after it released its locks,
// so a pid that is gone holds nothing.
func AwaitGone(tb testing.TB, db *sql.DB, pid int) {
	tb.Helper()
	var last error
	err := Poll(pollInterval, func() (bool, error) {
		var n int
		// A query can fail while the session ends, as when it held
		// so many locks that the table was full: try again.
		last = db.QueryRowContext(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&n)
		return last == nil && n == 0, nil
	})
	if err != nil {
		tb.Fatalf("pgtest: backend %d did not end: %v (last query: %v)", pid, err, last)
	}
}
