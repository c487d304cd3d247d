package pgxlock_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
	"github.com/pgadvisory/pgadvisory/pgxlock"
)

// begin begins a transaction on pool, rolled back at t's cleanup unless
// the test ended it.
func begin(tb testing.TB, pool *pgxpool.Pool) pgx.Tx {
	tb.Helper()
	tx, err := pool.Begin(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

// TestXactIntegration checks the transaction lock functions: who holds
// what in pg_locks, tries that find the key busy, shared locks, a wait,
// a wait that ctx ends, and the release at commit and at rollback.
func TestXactIntegration(t *testing.T) {
	eachServer(t, func(t *testing.T, s *pgtest.Server, obs *sql.DB) {
		ctx := context.Background()
		pool := newPool(t, s.DSN, nil)
		tests := []struct {
			name string
			run  func(t *testing.T, a, b pgx.Tx)
		}{
			{"TryBusyThenCommit", func(t *testing.T, a, b pgx.Tx) {
				k := randomKey()
				mustXactTry(t, pgxlock.TryXactLock, a, k, true)
				mustXactTry(t, pgxlock.TryXactLock, a, k, true) // again in the same transaction
				requireHeld(t, obs, k, false, pidOf(t, a))
				mustXactTry(t, pgxlock.TryXactLock, b, k, false)
				mustXactTry(t, pgxlock.TryXactLockShared, b, k, false)
				if err := a.Commit(ctx); err != nil {
					t.Fatal(err)
				}
				requireHeld(t, obs, k, false)
				mustXactTry(t, pgxlock.TryXactLock, b, k, true)
			}},
			{"SharedThenRollback", func(t *testing.T, a, b pgx.Tx) {
				k := randomKey()
				mustXactTry(t, pgxlock.TryXactLockShared, a, k, true)
				if err := pgxlock.XactLockShared(ctx, b, k); err != nil {
					t.Fatal(err)
				}
				requireHeld(t, obs, k, true, pidOf(t, a), pidOf(t, b))
				for _, tx := range []pgx.Tx{a, b} {
					if err := tx.Rollback(ctx); err != nil {
						t.Fatal(err)
					}
				}
				requireHeld(t, obs, k, true)
			}},
			{"XactLockWaits", func(t *testing.T, a, b pgx.Tx) {
				k := randomKey()
				if err := pgxlock.XactLock(ctx, a, k); err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- pgxlock.XactLock(ctx, b, k) }()
				pgtest.AwaitWaiting(t, obs, k)
				if err := a.Commit(ctx); err != nil {
					t.Fatal(err)
				}
				if err := <-done; err != nil {
					t.Fatalf("XactLock after the holder committed: %v", err)
				}
				requireHeld(t, obs, k, false, pidOf(t, b))
			}},
			{"XactLockDeadline", func(t *testing.T, a, b pgx.Tx) {
				k := randomKey()
				mustXactTry(t, pgxlock.TryXactLock, a, k, true)
				pid := pidOf(t, b)
				dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
				defer cancel()
				err := pgxlock.XactLock(dctx, b, k)
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("XactLock past its deadline = %v; want context.DeadlineExceeded", err)
				}
				if err := b.Rollback(ctx); err != nil && !b.Conn().IsClosed() {
					t.Fatalf("Rollback after the wait: %v", err)
				}
				pgtest.AwaitGone(t, obs, pid) // pgx closed the connection as ctx ended
				requireHeld(t, obs, k, false, pidOf(t, a))
			}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				tt.run(t, begin(t, pool), begin(t, pool))
			})
		}
	})
}

// mustXactTry fails t unless try(tx, key) reports want without error.
func mustXactTry(t *testing.T, try func(context.Context, pgx.Tx, advisory.Key) (bool, error), tx pgx.Tx, key advisory.Key, want bool) {
	t.Helper()
	ok, err := try(context.Background(), tx, key)
	if err != nil || ok != want {
		t.Fatalf("try %v = %v, %v; want %v, nil", key, ok, err, want)
	}
}
