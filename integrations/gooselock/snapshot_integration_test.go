package gooselock_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/pgadvisory/pgadvisory/integrations/gooselock"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// TestWaitHoldsNoSnapshotIntegration proves that both lockers, while they
// wait for a busy key, hold back neither VACUUM nor CREATE INDEX
// CONCURRENTLY, and get the key within a moment of its release.
func TestWaitHoldsNoSnapshotIntegration(t *testing.T) {
	waiters := []struct {
		name   string
		waiter pgtest.Waiter
	}{
		{"SessionLocker", func(ctx context.Context, db *sql.DB, _ pgtest.Key, held func()) error {
			l, err := gooselock.NewSessionLocker(gooselock.DefaultKey)
			if err != nil {
				return err
			}
			conn, err := db.Conn(ctx)
			if err != nil {
				return err
			}
			defer conn.Close()
			if err := l.SessionLock(ctx, conn); err != nil {
				return err
			}
			held()
			return l.SessionUnlock(ctx, conn)
		}},
		{"Locker", func(ctx context.Context, db *sql.DB, _ pgtest.Key, held func()) error {
			l, err := gooselock.NewLocker(gooselock.DefaultKey)
			if err != nil {
				return err
			}
			if err := l.Lock(ctx, db); err != nil {
				return err
			}
			held()
			return l.Unlock(ctx, db)
		}},
	}
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		for _, w := range waiters {
			t.Run(w.name, func(t *testing.T) {
				vacuumed, handoff := pgtest.RequireNoSnapshotWait(t, tg, gooselock.DefaultKey, pgtest.SnapshotCheck{CIC: true}, w.waiter)
				t.Logf("dead rows removed %v after the delete; the locker got the key %v after its release", vacuumed, handoff)
			})
		}
	})
}
