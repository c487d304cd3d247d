package migratelock_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/golang-migrate/migrate/v4/database/postgres"

	"github.com/pgadvisory/pgadvisory/integrations/migratelock"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// TestWaitHoldsNoSnapshotIntegration proves that Lock, while it waits for
// a busy key, holds back neither VACUUM nor CREATE INDEX CONCURRENTLY, and
// gets the key within a moment of its release.
func TestWaitHoldsNoSnapshotIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		waiter := func(_ context.Context, db *sql.DB, _ pgtest.Key, held func()) error {
			// The Migrate's Close, which is not called here, would close
			// db, the harness's.
			inner, err := postgres.WithInstance(db, &postgres.Config{})
			if err != nil {
				return err
			}
			drv, err := migratelock.WithInstance(inner, db, &migratelock.Config{Key: key, LockTimeout: pgtest.PollTimeout})
			if err != nil {
				return err
			}
			if err := drv.Lock(); err != nil {
				return err
			}
			held()
			return drv.Unlock()
		}
		vacuumed, handoff := pgtest.RequireNoSnapshotWait(t, tg, key, pgtest.SnapshotCheck{CIC: true}, waiter)
		t.Logf("dead rows removed %v after the delete; Lock got the key %v after its release", vacuumed, handoff)
	})
}

// TestPostgresDriverWaitHoldsSnapshotIntegration shows what the wrapper
// avoids: migrate's postgres driver waits for a busy key in one
// pg_advisory_lock statement, whose backend keeps a snapshot
// (pg_stat_activity.backend_xmin) for the whole wait.
func TestPostgresDriverWaitHoldsSnapshotIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		d := pgtest.NewDatabase(t, tg, "migratelock_pgwait")
		var dbName string
		if err := d.DB.QueryRow("SELECT pg_catalog.current_database()").Scan(&dbName); err != nil {
			t.Fatal(err)
		}
		db, err := d.Server.OpenDB(d.Driver)
		if err != nil {
			t.Fatal(err)
		}
		inner, err := postgres.WithInstance(db, &postgres.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer inner.Close()
		k := migratelock.PostgresKey(dbName, "public", postgres.DefaultMigrationsTable)
		conn := pgtest.Conn(t, d.DB)
		pgtest.Exec(t, conn, "SELECT pg_catalog.pg_advisory_lock($1)", mustInt64(t, k))

		locked := make(chan error, 1)
		go func() { locked <- inner.Lock() }()
		var waiter int
		pgtest.Await(t, "the postgres driver to wait for its key", func() (bool, error) {
			locks, err := pgtest.LocksOf(context.Background(), d.DB, k)
			for _, l := range locks {
				if !l.Granted {
					waiter = l.PID
					return true, err
				}
			}
			return false, err
		})
		var xminHeld bool
		if err := d.DB.QueryRow("SELECT backend_xmin IS NOT NULL FROM pg_catalog.pg_stat_activity WHERE pid = $1", waiter).Scan(&xminHeld); err != nil {
			t.Fatal(err)
		}
		if !xminHeld {
			t.Error("the postgres driver's waiting backend holds no snapshot; docs/migrations.md says it does")
		}
		pgtest.Exec(t, conn, "SELECT pg_catalog.pg_advisory_unlock($1)", mustInt64(t, k))
		if err := <-locked; err != nil {
			t.Fatal(err)
		}
		if err := inner.Unlock(); err != nil {
			t.Fatal(err)
		}
	})
}

// mustInt64 returns k's bigint, and fails t if k is a pair.
func mustInt64(t *testing.T, k interface{ Int64() (int64, bool) }) int64 {
	t.Helper()
	v, ok := k.Int64()
	if !ok {
		t.Fatal("key is not a bigint")
	}
	return v
}
