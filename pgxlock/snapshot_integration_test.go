package pgxlock_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
	"github.com/pgadvisory/pgadvisory/pgxlock"
)

// TestWaitHoldsNoSnapshotIntegration proves that pgxlock's waits, for a
// busy key, hold back neither VACUUM nor CREATE INDEX CONCURRENTLY (outside
// a transaction of the caller's, which holds its own snapshot), and hand
// the key over within a moment of its release. The harness gives each
// waiter a *sql.DB on pgx's driver, on a database of its own; the waiter
// reaches the *pgx.Conn under one of its connections and waits on it
// through pgxlock alone.
func TestWaitHoldsNoSnapshotIntegration(t *testing.T) {
	waiters := []struct {
		name string
		cic  bool
		wait func(ctx context.Context, conn *pgx.Conn, key advisory.Key, held func()) error
	}{
		{"Lock", true, func(ctx context.Context, conn *pgx.Conn, key advisory.Key, held func()) error {
			if err := pgxlock.Lock(ctx, conn, key); err != nil {
				return err
			}
			held()
			return pgxlock.Unlock(ctx, conn, key)
		}},
		{"LockKeys", true, func(ctx context.Context, conn *pgx.Conn, key advisory.Key, held func()) error {
			if err := pgxlock.LockKeys(ctx, conn, key); err != nil {
				return err
			}
			held()
			return pgxlock.UnlockKeys(ctx, conn, key)
		}},
		{"WithSessionLockConn", true, func(ctx context.Context, conn *pgx.Conn, key advisory.Key, held func()) error {
			return pgxlock.WithSessionLockConn(ctx, conn, key, func(context.Context, *pgx.Conn) error { held(); return nil })
		}},
		{"XactLock", false, func(ctx context.Context, conn *pgx.Conn, key advisory.Key, held func()) error {
			return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				if err := pgxlock.XactLock(ctx, tx, key); err != nil {
					return err
				}
				held()
				return nil
			})
		}},
	}
	pgtest.EachDriver(t, []string{pgtest.DriverPGX}, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		for _, w := range waiters {
			t.Run(w.name, func(t *testing.T) {
				key := randomKey()
				waiter := func(ctx context.Context, db *sql.DB, _ pgtest.Key, held func()) error {
					conn, err := db.Conn(ctx)
					if err != nil {
						return err
					}
					defer conn.Close()
					return conn.Raw(func(dc any) error {
						sc, ok := dc.(*stdlib.Conn)
						if !ok {
							return fmt.Errorf("the harness's connection is a %T, not pgx's", dc)
						}
						return w.wait(ctx, sc.Conn(), key, held)
					})
				}
				vacuumed, handoff := pgtest.RequireNoSnapshotWait(t, tg, key, pgtest.SnapshotCheck{CIC: w.cic}, waiter)
				t.Logf("dead rows removed %v after the delete; the waiter got the key %v after its release", vacuumed, handoff)
			})
		}
	})
}
