package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/leader"
	"github.com/pgadvisory/pgadvisory/advisory/semaphore"
	"github.com/pgadvisory/pgadvisory/middleware/httplock"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// Integration tests on a hot standby (TestEntryPointsIntegration/Standby;
// see entrypoints_integration_test.go). Advisory locks are per server: a
// lock taken on a standby excludes no one on the primary. So every entry
// point refuses a standby with ErrStandby, plain locks and scopes
// included, while a primary session holds the same key; no fn, handler or
// leader runs, and the standby's pg_locks shows the key free afterwards.

// standbyCase is one entry point called on the standby. call returns
// what the entry point returned; it sets *ran when the caller's code ran.
type standbyCase struct {
	name string
	call func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, ran *bool) error
	// begins is set when the entry point begins a read-write
	// transaction of its own: lib/pq sends BEGIN READ WRITE, which a
	// standby refuses (SQLSTATE 0A000) before any lock is tried.
	begins bool
}

// readOnly is the transaction a standby lets a caller begin on either
// driver, so that the lock statement is what refuses it.
var readOnly = &sql.TxOptions{ReadOnly: true}

// inReadOnlyTx runs f in a read-only transaction of db's, rolled back
// afterwards.
func inReadOnlyTx(ctx context.Context, t *testing.T, db *sql.DB, f func(*sql.Tx) error) error {
	t.Helper()
	tx, err := db.BeginTx(ctx, readOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	return f(tx)
}

// okBool drops TryLock's bool, failing the test if it reports a lock
// taken along with an error, or without one.
func okBool(t *testing.T, try func() (bool, error)) error {
	t.Helper()
	ok, err := try()
	if ok {
		t.Errorf("reported the lock acquired (err %v)", err)
	}
	return err
}

// releaseLease releases a lease that should not have been granted.
func releaseLease(t *testing.T, acquire func() (*advisory.Lease, error)) error {
	t.Helper()
	l, err := acquire()
	if l != nil {
		t.Error("granted a lease")
		_ = l.Release(context.Background())
	}
	return err
}

var standbyCases = []standbyCase{
	{"TryLock", func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, _ *bool) error {
		return onConn(ctx, db, func(c *sql.Conn) error {
			return okBool(t, func() (bool, error) { return advisory.TryLock(ctx, c, key) })
		})
	}, false},
	{"TryLockShared", func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, _ *bool) error {
		return onConn(ctx, db, func(c *sql.Conn) error {
			return okBool(t, func() (bool, error) { return advisory.TryLockShared(ctx, c, key) })
		})
	}, false},
	{"Lock", func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, _ *bool) error {
		return onConn(ctx, db, func(c *sql.Conn) error { return advisory.Lock(ctx, c, key) })
	}, false},
	{"LockShared", func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, _ *bool) error {
		return onConn(ctx, db, func(c *sql.Conn) error { return advisory.LockShared(ctx, c, key) })
	}, false},
	{"LockKeys", func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, _ *bool) error {
		return onConn(ctx, db, func(c *sql.Conn) error { return advisory.LockKeys(ctx, c, key, advisory.Int64Key(rand.Int64())) })
	}, false},
	{"XactLock", func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, _ *bool) error {
		return inReadOnlyTx(ctx, t, db, func(tx *sql.Tx) error { return advisory.XactLock(ctx, tx, key) })
	}, false},
	{"TryXactLock", func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, _ *bool) error {
		return inReadOnlyTx(ctx, t, db, func(tx *sql.Tx) error {
			return okBool(t, func() (bool, error) { return advisory.TryXactLock(ctx, tx, key) })
		})
	}, false},
	{"XactLockKeys", func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, _ *bool) error {
		return inReadOnlyTx(ctx, t, db, func(tx *sql.Tx) error { return advisory.XactLockKeys(ctx, tx, key, advisory.Int64Key(rand.Int64())) })
	}, false},
	{"WithSessionLock", func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, ran *bool) error {
		return advisory.WithSessionLock(ctx, db, key, func(context.Context, *sql.Conn) error { *ran = true; return nil })
	}, false},
	{"WithSessionLockTry", func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, ran *bool) error {
		return advisory.WithSessionLock(ctx, db, key, func(context.Context, *sql.Conn) error { *ran = true; return nil }, advisory.Try())
	}, false},
	{"WithSessionLockHeartbeat", func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, ran *bool) error {
		return advisory.WithSessionLock(ctx, db, key, func(context.Context, *sql.Conn) error { *ran = true; return nil },
			advisory.Heartbeat(time.Second))
	}, false},
	{"WithSessionLockConn", func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, ran *bool) error {
		return onConn(ctx, db, func(c *sql.Conn) error {
			return advisory.WithSessionLockConn(ctx, c, key, func(context.Context, *sql.Conn) error { *ran = true; return nil })
		})
	}, false},
	{"WithXactLock", func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, ran *bool) error {
		return advisory.WithXactLock(ctx, db, key, func(context.Context, *sql.Tx) error { *ran = true; return nil })
	}, true},
	{"WithXactLockReadOnly", func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, ran *bool) error {
		return advisory.WithXactLock(ctx, db, key, func(context.Context, *sql.Tx) error { *ran = true; return nil },
			advisory.TxOptions(readOnly))
	}, false},
	{"WithXactLockTry", func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, ran *bool) error {
		return advisory.WithXactLock(ctx, db, key, func(context.Context, *sql.Tx) error { *ran = true; return nil }, advisory.Try())
	}, true},
	{"WithXactLockTx", func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, ran *bool) error {
		return inReadOnlyTx(ctx, t, db, func(tx *sql.Tx) error {
			return advisory.WithXactLockTx(ctx, tx, key, func(context.Context, *sql.Tx) error { *ran = true; return nil })
		})
	}, false},
	{"Acquire", func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, _ *bool) error {
		return releaseLease(t, func() (*advisory.Lease, error) { return advisory.Acquire(ctx, db, key, advisory.Try()) })
	}, false},
	{"AcquireFencing", func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, _ *bool) error {
		// The primary of a shared pair may never have issued a token,
		// so the standby may lack the fencing sequence: refused all
		// the same, not with the error of creating it.
		return releaseLease(t, func() (*advisory.Lease, error) {
			return advisory.Acquire(ctx, db, key, advisory.Try(), advisory.Fencing())
		})
	}, false},
	{"Watch", func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, _ *bool) error {
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// A lock taken by hand: the server grants it on a standby.
		c, o := keyInts(key)
		if _, err := conn.ExecContext(ctx, "SELECT pg_catalog.pg_advisory_lock($1::int4, $2::int4)", c, o); err != nil {
			conn.Close()
			t.Fatal(err)
		}
		// Watch closes conn.
		return releaseLease(t, func() (*advisory.Lease, error) { return advisory.Watch(ctx, conn, key, advisory.WatchConfig{}) })
	}, false},
	{"WatchFencing", func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, _ *bool) error {
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// A lock taken by hand: the server grants it on a standby.
		c, o := keyInts(key)
		if _, err := conn.ExecContext(ctx, "SELECT pg_catalog.pg_advisory_lock($1::int4, $2::int4)", c, o); err != nil {
			conn.Close()
			t.Fatal(err)
		}
		// Watch closes conn.
		return releaseLease(t, func() (*advisory.Lease, error) {
			return advisory.Watch(ctx, conn, key, advisory.WatchConfig{Fencing: true})
		})
	}, false},
	{"Locker", func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, _ *bool) error {
		lk, err := advisory.NewLocker(db, advisory.LockerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Close(context.Background())
		return releaseLease(t, func() (*advisory.Lease, error) { return lk.Acquire(ctx, key, advisory.Try()) })
	}, false},
	{"LockerFencing", func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, _ *bool) error {
		lk, err := advisory.NewLocker(db, advisory.LockerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		defer lk.Close(context.Background())
		return releaseLease(t, func() (*advisory.Lease, error) { return lk.Acquire(ctx, key, advisory.Try(), advisory.Fencing()) })
	}, false},
	{"SemaphoreTryAcquire", func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, _ *bool) error {
		return releaseLease(t, func() (*advisory.Lease, error) { return semaphore.New(db, key, 3).TryAcquire(ctx) })
	}, false},
	{"SemaphoreAcquireFencing", func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, _ *bool) error {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		return releaseLease(t, func() (*advisory.Lease, error) { return semaphore.New(db, key, 3, semaphore.Fencing()).Acquire(ctx) })
	}, false},
	{"LeaderRun", func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, ran *bool) error {
		return leaderOnStandby(ctx, t, db, key, ran)
	}, false},
	{"LeaderRunFencing", func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, ran *bool) error {
		return leaderOnStandby(ctx, t, db, key, ran, leader.Fencing())
	}, false},
	{"HTTPLock", func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, ran *bool) error {
		var got error
		mw := httplock.XactLock(db, func(*http.Request) (advisory.Key, error) { return key, nil },
			httplock.ErrorHandler(func(w http.ResponseWriter, _ *http.Request, err error) {
				got = err
				http.Error(w, "refused", http.StatusServiceUnavailable)
			}))
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			*ran = true
			w.WriteHeader(http.StatusNoContent)
		}))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodPost, "/orders/1", nil))
		if rec.Code != http.StatusServiceUnavailable {
			t.Errorf("status %d, want the error handler's %d", rec.Code, http.StatusServiceUnavailable)
		}
		return got
	}, true},
	{"HTTPLockReadOnly", func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, ran *bool) error {
		var got error
		mw := httplock.XactLock(db, func(*http.Request) (advisory.Key, error) { return key, nil },
			httplock.TxOptions(readOnly),
			httplock.ErrorHandler(func(w http.ResponseWriter, _ *http.Request, err error) {
				got = err
				http.Error(w, "refused", http.StatusServiceUnavailable)
			}))
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			*ran = true
			w.WriteHeader(http.StatusNoContent)
		}))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, "/orders/1", nil))
		if rec.Code != http.StatusServiceUnavailable {
			t.Errorf("status %d, want the error handler's %d", rec.Code, http.StatusServiceUnavailable)
		}
		return got
	}, false},
}

// leaderOnStandby runs leader.Run on the standby with a context far
// longer than any campaign: it must return ErrStandby by itself, before
// that context ends, and never lead.
func leaderOnStandby(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key, ran *bool, opts ...leader.Option) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err := leader.Run(ctx, db, key, func(context.Context, *advisory.Lease) error { *ran = true; return nil },
		append(opts, leader.Backoff(10*time.Millisecond, 20*time.Millisecond))...)
	if ctx.Err() != nil {
		t.Errorf("leader.Run returned %v only when its context ended", err)
	}
	return err
}

// keyInts returns the two int32s of a pair key.
func keyInts(key advisory.Key) (int32, int32) {
	a, b, _ := key.Pair()
	return a, b
}

func testEntryPointsStandby(t *testing.T) {
	t.Parallel()
	pgtest.EachStandby(t, func(t *testing.T, tg pgtest.StandbyTarget) {
		t.Parallel()
		ctx := context.Background()
		for _, tc := range standbyCases {
			t.Run(tc.name, func(t *testing.T) {
				key := advisory.PairKey(0x57a4db, rand.Int32())
				// A primary session holds the key all along: a lock
				// granted on the standby would exclude no one.
				holder := pgtest.Conn(t, tg.Primary)
				if ok, err := advisory.TryLock(ctx, holder, key); err != nil || !ok {
					t.Fatalf("primary: TryLock = %v, %v", ok, err)
				}
				var ran bool
				err := tc.call(ctx, t, tg.Standby, key, &ran)
				switch {
				case errors.Is(err, advisory.ErrStandby):
				case tc.begins && tg.Driver == pgtest.DriverPQ && pgSQLState(err) == "0A000":
					// Refused by the server at BEGIN READ WRITE,
					// before the lock: nothing was locked.
				default:
					t.Errorf("on the standby: %v, want ErrStandby", err)
				}
				if ran {
					t.Error("the caller's code ran on the standby")
				}
				pgtest.AwaitFree(t, tg.Standby, key)
				if err := advisory.Unlock(ctx, holder, key); err != nil {
					t.Errorf("primary: Unlock = %v", err)
				}
			})
		}
	})
}
