package pgxlock_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
	"github.com/pgadvisory/pgadvisory/pgxlock"
)

// newTable creates a table of the test's own on pool, dropped at t's
// cleanup, and returns its name.
func newTable(tb testing.TB, pool *pgxpool.Pool) string {
	tb.Helper()
	name := pgtest.UniqueName("pgxlock_")
	if _, err := pool.Exec(context.Background(), "CREATE TABLE "+name+" (id int PRIMARY KEY)"); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP TABLE "+name) })
	return name
}

// rows counts the rows of table, as committed.
func rows(tb testing.TB, pool *pgxpool.Pool, table string) int {
	tb.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}

// requireIdleClean fails tb if any idle connection of pool holds an
// advisory lock: a lock that went back to the pool with its connection.
func requireIdleClean(tb testing.TB, pool *pgxpool.Pool) {
	tb.Helper()
	ctx := context.Background()
	for _, c := range pool.AcquireAllIdle(ctx) {
		var n int
		err := c.QueryRow(ctx, "SELECT count(*) FROM pg_catalog.pg_locks WHERE locktype = 'advisory' AND pid = pg_catalog.pg_backend_pid()").Scan(&n)
		c.Release()
		if err != nil {
			tb.Fatal(err)
		}
		if n != 0 {
			tb.Fatalf("an idle connection of the pool holds %d advisory locks", n)
		}
	}
}

// TestWithXactLockIntegration checks the transaction scopes: the lock is
// held while fn runs and ends with the transaction; fn's work commits
// when fn returns nil, and rolls back on an error, a panic, a busy key, a
// wait that runs out or a ctx that ends; CommitEarly commits before fn
// returns; TxOptions reaches the transaction, through a wait in slices
// too; and the pool gets its connections back holding nothing.
func TestWithXactLockIntegration(t *testing.T) {
	eachServer(t, func(t *testing.T, s *pgtest.Server, obs *sql.DB) {
		ctx := context.Background()
		pool := newPool(t, s.DSN, nil)
		table := newTable(t, pool)
		insert := func(ctx context.Context, tx pgx.Tx, id int) error {
			_, err := tx.Exec(ctx, "INSERT INTO "+table+" (id) VALUES ($1)", id)
			return err
		}
		// hold takes k on a connection of its own until the returned
		// function lets it go.
		hold := func(t *testing.T, k advisory.Key) (release func()) {
			conn := acquire(t, pool)
			if err := pgxlock.Lock(ctx, conn, k); err != nil {
				t.Fatal(err)
			}
			return func() {
				if err := pgxlock.Unlock(ctx, conn, k); err != nil {
					t.Error(err)
				}
				conn.Release()
			}
		}
		errFn := errors.New("fn failed")
		id := 0
		tests := []struct {
			name string
			// run returns how many rows it expects committed.
			run func(t *testing.T, k advisory.Key, id int) int
		}{
			{"Commits", func(t *testing.T, k advisory.Key, id int) int {
				err := pgxlock.WithXactLock(ctx, pool, k, func(ctx context.Context, tx pgx.Tx) error {
					if got, ok := pgxlock.TxFromContext(ctx); !ok || got != tx {
						t.Errorf("TxFromContext = %v, %v; want fn's tx", got, ok)
					}
					requireHeld(t, obs, k, false, pidOf(t, tx))
					return insert(ctx, tx, id)
				})
				if err != nil {
					t.Fatal(err)
				}
				return 1
			}},
			{"Shared", func(t *testing.T, k advisory.Key, id int) int {
				err := pgxlock.WithXactLock(ctx, pool, k, func(ctx context.Context, tx pgx.Tx) error {
					requireHeld(t, obs, k, true, pidOf(t, tx))
					return nil
				}, advisory.Shared())
				if err != nil {
					t.Fatal(err)
				}
				return 0
			}},
			{"TryBusy", func(t *testing.T, k advisory.Key, id int) int {
				defer hold(t, k)()
				called := false
				err := pgxlock.WithXactLock(ctx, pool, k, func(context.Context, pgx.Tx) error { called = true; return nil }, advisory.Try())
				if !errors.Is(err, advisory.ErrNotAcquired) || called {
					t.Fatalf("WithXactLock(Try) on a busy key = %v, fn called %v; want ErrNotAcquired, not called", err, called)
				}
				return 0
			}},
			{"WaitRunsOut", func(t *testing.T, k advisory.Key, id int) int {
				defer hold(t, k)()
				err := pgxlock.WithXactLock(ctx, pool, k, func(context.Context, pgx.Tx) error { return nil }, advisory.Wait(50*time.Millisecond))
				var pgErr *pgconn.PgError
				if !errors.Is(err, advisory.ErrLockTimeout) || !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
					t.Fatalf("WithXactLock(Wait) on a busy key = %v; want ErrLockTimeout over a *pgconn.PgError 55P03", err)
				}
				return 0
			}},
			{"WaitsInSlices", func(t *testing.T, k advisory.Key, id int) int {
				release := hold(t, k)
				done := make(chan error, 1)
				go func() {
					// The wait ends its transaction and begins another for
					// each slice: with the isolation level TxOptions gave.
					done <- pgxlock.WithXactLock(ctx, pool, k, func(ctx context.Context, tx pgx.Tx) error {
						var iso string
						if err := tx.QueryRow(ctx, "SELECT pg_catalog.current_setting('transaction_isolation')").Scan(&iso); err != nil {
							return err
						}
						if iso != "repeatable read" {
							return errors.New("transaction_isolation is " + iso + "; want repeatable read")
						}
						return insert(ctx, tx, id)
					}, advisory.TxOptions(&sql.TxOptions{Isolation: sql.LevelRepeatableRead}))
				}()
				pgtest.AwaitWaiting(t, obs, k)
				release()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				return 1
			}},
			{"FnError", func(t *testing.T, k advisory.Key, id int) int {
				err := pgxlock.WithXactLock(ctx, pool, k, func(ctx context.Context, tx pgx.Tx) error {
					if err := insert(ctx, tx, id); err != nil {
						return err
					}
					return errFn
				})
				if !errors.Is(err, errFn) {
					t.Fatalf("WithXactLock = %v; want fn's error", err)
				}
				return 0
			}},
			{"Panic", func(t *testing.T, k advisory.Key, id int) int {
				defer func() {
					if r := recover(); r != "boom" {
						t.Fatalf("recovered %v; want fn's panic", r)
					}
				}()
				_ = pgxlock.WithXactLock(ctx, pool, k, func(ctx context.Context, tx pgx.Tx) error {
					if err := insert(ctx, tx, id); err != nil {
						return err
					}
					panic("boom")
				})
				t.Fatal("the panic did not go on")
				return 0
			}},
			{"CommitEarly", func(t *testing.T, k advisory.Key, id int) int {
				err := pgxlock.WithXactLock(ctx, pool, k, func(ctx context.Context, tx pgx.Tx) error {
					if err := insert(ctx, tx, id); err != nil {
						return err
					}
					if err := advisory.CommitEarly(ctx); err != nil {
						return err
					}
					// Committed and released before fn returns.
					requireHeld(t, obs, k, false)
					if n := rows(t, pool, table); n != 1 {
						t.Errorf("after CommitEarly %d rows committed; want 1", n)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				return 1
			}},
			{"TxOptions", func(t *testing.T, k advisory.Key, id int) int {
				err := pgxlock.WithXactLock(ctx, pool, k, func(ctx context.Context, tx pgx.Tx) error {
					var iso, ro string
					err := tx.QueryRow(ctx, "SELECT pg_catalog.current_setting('transaction_isolation'), pg_catalog.current_setting('transaction_read_only')").Scan(&iso, &ro)
					if err == nil && (iso != "serializable" || ro != "on") {
						t.Errorf("transaction_isolation %q, transaction_read_only %q; want serializable, on", iso, ro)
					}
					return err
				}, advisory.TxOptions(&sql.TxOptions{Isolation: sql.LevelSerializable, ReadOnly: true}))
				if err != nil {
					t.Fatal(err)
				}
				return 0
			}},
			{"BadIsolation", func(t *testing.T, k advisory.Key, id int) int {
				err := pgxlock.WithXactLock(ctx, pool, k, func(context.Context, pgx.Tx) error { return nil },
					advisory.TxOptions(&sql.TxOptions{Isolation: sql.LevelSnapshot}))
				if !errors.Is(err, advisory.ErrBadOption) {
					t.Fatalf("WithXactLock(LevelSnapshot) = %v; want ErrBadOption", err)
				}
				return 0
			}},
			{"CtxEndsInFn", func(t *testing.T, k advisory.Key, id int) int {
				cctx, cancel := context.WithCancel(ctx)
				err := pgxlock.WithXactLock(cctx, pool, k, func(ctx context.Context, tx pgx.Tx) error {
					if err := insert(ctx, tx, id); err != nil {
						return err
					}
					cancel()
					return nil
				})
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("WithXactLock whose ctx ended in fn = %v; want context.Canceled", err)
				}
				return 0
			}},
			{"WithXactLockTx", func(t *testing.T, k advisory.Key, id int) int {
				tx := begin(t, pool)
				err := pgxlock.WithXactLockTx(ctx, tx, k, func(ctx context.Context, got pgx.Tx) error {
					if got != tx {
						t.Error("fn did not receive the caller's tx")
					}
					requireHeld(t, obs, k, false, pidOf(t, tx))
					return insert(ctx, tx, id)
				})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := tx.Exec(ctx, "SELECT 1"); !errors.Is(err, pgx.ErrTxClosed) {
					t.Fatalf("tx after WithXactLockTx: %v; want pgx.ErrTxClosed", err)
				}
				return 1
			}},
			{"WithXactLockTxWaitRunsOut", func(t *testing.T, k advisory.Key, id int) int {
				defer hold(t, k)()
				tx := begin(t, pool)
				if err := insert(ctx, tx, id); err != nil {
					t.Fatal(err)
				}
				err := pgxlock.WithXactLockTx(ctx, tx, k, func(context.Context, pgx.Tx) error { return nil }, advisory.Wait(50*time.Millisecond))
				if !errors.Is(err, advisory.ErrLockTimeout) {
					t.Fatalf("WithXactLockTx(Wait) on a busy key = %v; want ErrLockTimeout", err)
				}
				return 0
			}},
			{"WithXactLockTxNilFn", func(t *testing.T, k advisory.Key, id int) int {
				tx := begin(t, pool)
				if err := pgxlock.WithXactLockTx(ctx, tx, k, nil); err == nil {
					t.Fatal("nil fn accepted")
				}
				if _, err := tx.Exec(ctx, "SELECT 1"); !errors.Is(err, pgx.ErrTxClosed) {
					t.Fatalf("tx after a refused WithXactLockTx: %v; want it rolled back", err)
				}
				return 0
			}},
		}
		for _, tt := range tests {
			id++
			t.Run(tt.name, func(t *testing.T) {
				if _, err := pool.Exec(ctx, "DELETE FROM "+table); err != nil {
					t.Fatal(err)
				}
				k := randomKey()
				want := tt.run(t, k, id)
				if got := rows(t, pool, table); got != want {
					t.Errorf("%d rows committed; want %d", got, want)
				}
				pgtest.AwaitFree(t, obs, k)
				requireIdleClean(t, pool)
			})
		}
	})
}
