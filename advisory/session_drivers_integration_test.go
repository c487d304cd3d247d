package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// Integration tests of TestSessionIntegration on what the drivers and
// pools do with a session that the session functions leave: a wait they
// cancel, a session they discard on pgxpool, and one they give back to
// database/sql's pool.

// testSessionPgxPoolDiscard proves that a session the library
// discards ends on a *sql.DB from stdlib.OpenDBFromPool, whose connections
// pgxpool lends: closing one there hands the session back to pgxpool,
// locks and all, unless the session is in a transaction, busy or closed;
// and database/sql closes a *sql.Conn only once a transaction open on it
// has ended.
func testSessionPgxPoolDiscard(t *testing.T) {
	for _, s := range pgtest.Servers(t) {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool, err := pgxpool.New(ctx, s.DSN)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			db := stdlib.OpenDBFromPool(pool)
			t.Cleanup(func() { db.Close() })
			look := s.Open(t, pgtest.DriverPQ)
			keys := newPGKeys()

			for _, tt := range []struct {
				name    string
				discard func(t *testing.T, k advisory.Key)
			}{
				{"UnlockNotHeld", func(t *testing.T, k advisory.Key) {
					conn := pgtest.Conn(t, db)
					if err := advisory.Lock(ctx, conn, k); err != nil {
						t.Fatal(err)
					}
					// A key not held puts the session in doubt: Unlock
					// discards it, and k with it.
					if err := advisory.Unlock(ctx, conn, keys.next()); !errors.Is(err, advisory.ErrNotHeld) {
						t.Fatalf("Unlock of a key not held: %v; want ErrNotHeld", err)
					}
					_ = conn.Close()
				}},
				{"ScopeCtxEnded", func(t *testing.T, k advisory.Key) {
					// A context that ends while fn runs leaves the
					// session in doubt: the scope on a caller's conn
					// releases its key and discards the session, with
					// the lock fn took on it, k.
					conn := pgtest.Conn(t, db)
					sctx, cancel := context.WithCancel(ctx)
					defer cancel()
					_ = advisory.WithSessionLockConn(sctx, conn, keys.next(), func(ctx context.Context, conn *sql.Conn) error {
						err := advisory.Lock(ctx, conn, k)
						cancel()
						return err
					})
					_ = conn.Close()
				}},
				{"ScopeTxLeftOpen", func(t *testing.T, k advisory.Key) {
					// fn leaves a transaction open on the caller's conn:
					// the scope closes the session under it, and then
					// database/sql rolls the transaction back, on a
					// goroutine of its own, as fn's context ends. Under
					// -race this also shows that pgxpool, destroying the
					// connection on its own goroutine, does not race that
					// rollback.
					conn := pgtest.Conn(t, db)
					err := advisory.WithSessionLockConn(ctx, conn, keys.next(), func(ctx context.Context, c *sql.Conn) error {
						if err := advisory.Lock(ctx, c, k); err != nil {
							return err
						}
						_, err := c.BeginTx(ctx, nil)
						return err
					})
					if err == nil {
						t.Error("WithSessionLockConn whose fn left a transaction open returned nil")
					}
					_ = conn.Close()
				}},
				{"CallerTxOpen", func(t *testing.T, k advisory.Key) {
					// A transaction the caller began on conn is open when
					// Unlock discards the session: database/sql closes
					// conn only once that transaction ends, and Unlock
					// waits for it, but the session, and k, must end now.
					conn := pgtest.Conn(t, db)
					if err := advisory.Lock(ctx, conn, k); err != nil {
						t.Fatal(err)
					}
					tx, err := conn.BeginTx(ctx, nil)
					if err != nil {
						t.Fatal(err)
					}
					unlocked := make(chan error, 1)
					go func() { unlocked <- advisory.Unlock(ctx, conn, keys.next()) }()
					t.Cleanup(func() {
						_ = tx.Rollback()
						if err := <-unlocked; !errors.Is(err, advisory.ErrNotHeld) {
							t.Errorf("Unlock of a key not held: %v; want ErrNotHeld", err)
						}
						_ = conn.Close()
					})
				}},
			} {
				t.Run(tt.name, func(t *testing.T) {
					k := keys.next()
					tt.discard(t, k)
					// A lock of a discarded session ends with it.
					pgtest.AwaitFree(t, look, k)
				})
			}
		})
	}
}

// cancelledWaits is how many cancelled waits each driver is checked with.
const cancelledWaits = 10

// testSessionCancelledWaitEndsOnServer checks what a cancelled wait leaves
// on the server, as docs/concepts.md states it: every driver tells the
// server to stop waiting. lib/pq sends a CancelRequest; pgx by default
// closes the connection, sending a CancelRequest and then Terminate as it
// does (pgconn.asyncClose); pgx in its cancel-request mode sends a
// CancelRequest and keeps the session. A backend blocked in
// pg_advisory_lock does not read its socket, so without the CancelRequest
// it would wait for as long as the holder holds the key.
func testSessionCancelledWaitEndsOnServer(t *testing.T) {
	pgtest.EachDriver(t, pgAllDrivers, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		keys := newPGKeys()
		holder := pgtest.Conn(t, tg.DB)
		var took []time.Duration
		for i := range cancelledWaits {
			k := keys.next()
			if err := advisory.Lock(ctx, holder, k); err != nil {
				t.Fatalf("wait %d: holder: Lock(%s): %v", i, k, err)
			}
			waiter := pgtest.Conn(t, tg.DB)
			pid := pgtest.PID(t, waiter)
			_, err := pgEndWhileWaiting(t, tg.DB, pid, k, context.Canceled, func(wctx context.Context) error {
				return advisory.Lock(wctx, waiter, k)
			})
			cancelled := time.Now()
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("wait %d: Lock cancelled while it waits = %v; want an error wrapping context.Canceled", i, err)
			}

			// The holder keeps the key throughout: only a CancelRequest
			// can end the wait now.
			pgtest.Await(t, fmt.Sprintf("wait %d: the server to stop waiting for %s after the cancel", i, k), func() (bool, error) {
				locks, err := pgQueryLocksOfKey(ctx, tg.DB, k)
				return !slices.ContainsFunc(locks, func(l pgLock) bool { return !l.granted }), err
			})
			took = append(took, time.Since(cancelled))
			pgRequireHolds(t, tg.DB, pgtest.PID(t, holder), k, false)
			if err := advisory.Unlock(ctx, holder, k); err != nil {
				t.Fatalf("wait %d: holder: Unlock(%s): %v", i, k, err)
			}
			pgRequireFree(t, tg.DB, k)
		}
		slices.Sort(took)
		t.Logf("%d cancelled waits: the server stopped waiting within %v (median), %v (max)", len(took), took[len(took)/2], took[len(took)-1])
	})
}

// testSessionPooledConnKeepsLock, a server fact shown with plain SQL and
// database/sql, without the library's helpers: closing a *sql.Conn returns
// its session to the pool with its session lock, and neither driver's
// session reset releases it: the next user of the pool draws the same
// backend, still holding the key. DISCARD ALL, the reset query PgBouncer
// runs in session mode, does release it.
func testSessionPooledConnKeepsLock(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		db := pgOpenOne(t, tg) // a pool of one: the next Conn is the same session
		key := newPGKeys().nextPair()

		conn := pgtest.Conn(t, db)
		pid := pgtest.PID(t, conn)
		if err := advisory.Lock(ctx, conn, key); err != nil {
			t.Fatal(err)
		}
		if err := conn.Close(); err != nil { // the ghost-lock mistake
			t.Fatal(err)
		}

		next := pgtest.Conn(t, db)
		if got := pgtest.PID(t, next); got != pid {
			t.Fatalf("the pool of one handed out backend %d, then %d", pid, got)
		}
		pgRequireHolds(t, tg.DB, pid, key, false)

		pgtest.Exec(t, next, "DISCARD ALL")
		pgRequireNoLocks(t, tg.DB, pid)
	})
}
