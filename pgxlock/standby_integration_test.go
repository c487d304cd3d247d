package pgxlock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
	"github.com/pgadvisory/pgadvisory/pgxlock"
)

// TestStandbyRefuses checks that every lock call refuses on a hot
// standby, where an advisory lock would exclude no one on the primary,
// with an error matching advisory.ErrStandby, holding nothing: in the
// statement that would take the lock, so that a session lock call keeps
// its connection open (a refusal takes nothing, so nothing is in doubt).
// The same calls on the primary take their lock.
func TestStandbyRefuses(t *testing.T) {
	for _, p := range pgtest.Standbys(t) {
		t.Run(p.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			obs := p.Standby.Open(t, pgtest.DriverPQ)
			standby := newPool(t, p.Standby.DSN, nil)
			primary := newPool(t, p.Primary.DSN, nil)
			fn := func(context.Context, pgx.Tx) error { return nil }
			tests := []struct {
				name string
				call func(t *testing.T, pool *pgxpool.Pool, k advisory.Key) error
			}{
				{"TryXactLock", func(t *testing.T, pool *pgxpool.Pool, k advisory.Key) error {
					tx := begin(t, pool)
					_, err := pgxlock.TryXactLock(ctx, tx, k)
					return err
				}},
				{"XactLock", func(t *testing.T, pool *pgxpool.Pool, k advisory.Key) error {
					return pgxlock.XactLock(ctx, begin(t, pool), k)
				}},
				{"WithXactLock", func(t *testing.T, pool *pgxpool.Pool, k advisory.Key) error {
					return pgxlock.WithXactLock(ctx, pool, k, fn, advisory.Try())
				}},
				{"WithXactLockWait", func(t *testing.T, pool *pgxpool.Pool, k advisory.Key) error {
					return pgxlock.WithXactLock(ctx, pool, k, fn)
				}},
				{"TryLock", func(t *testing.T, pool *pgxpool.Pool, k advisory.Key) error {
					conn := acquire(t, pool)
					_, err := pgxlock.TryLock(ctx, conn, k)
					if conn.Conn().IsClosed() {
						t.Error("a refused TryLock closed its connection")
					}
					return err
				}},
				{"Lock", func(t *testing.T, pool *pgxpool.Pool, k advisory.Key) error {
					conn := acquire(t, pool)
					err := pgxlock.Lock(ctx, conn, k)
					if conn.Conn().IsClosed() {
						t.Error("a refused Lock closed its connection")
					}
					return err
				}},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					k := randomKey()
					err := tt.call(t, standby, k)
					if !errors.Is(err, advisory.ErrStandby) {
						t.Fatalf("on the standby: %v; want ErrStandby", err)
					}
					requireHeld(t, obs, k, false)
					if err := tt.call(t, primary, k); err != nil {
						t.Fatalf("on the primary: %v", err)
					}
				})
			}
		})
	}
}
