package migratelock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/golang-migrate/migrate/v4/database"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/integrations/migratelock"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// TestLeaseLostIntegration terminates, with pg_terminate_backend, the
// backend that holds the lease while the first migration waits at the
// gate, and waits for OnLoss to report the loss before it opens the gate.
// The migration then ends on the postgres driver's own session, which
// the loss does not touch, but the Driver refuses the SetVersion that
// would mark it clean, and Up returns an error matching
// advisory.ErrLockLost. The version stays dirty, migration 2 never ran,
// and nothing is left held.
func TestLeaseLostIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		d := pgtest.NewDatabase(t, tg, "migratelock_loss")
		open := holdGate(t, d.DB)
		lost := make(chan error, 1)
		m, _ := newMigrate(t, d, migratelock.Config{
			Heartbeat: 100 * time.Millisecond,
			OnLoss:    func(err error) { lost <- err },
		})
		done := make(chan error, 1)
		go func() { done <- m.Up() }()
		pgtest.AwaitWaiting(t, d.DB, advisory.Int64Key(gateKey))
		pid := pgtest.AwaitHolder(t, d.DB, key)
		pgtest.Exec(t, d.DB, "SELECT pg_catalog.pg_terminate_backend($1)", pid)
		select {
		case err := <-lost:
			if !errors.Is(err, advisory.ErrLockLost) {
				t.Errorf("OnLoss(%v); want an error matching advisory.ErrLockLost", err)
			}
		case <-time.After(pgtest.PollTimeout):
			t.Fatalf("OnLoss not called within %v of the termination", pgtest.PollTimeout)
		}
		open()

		err := <-done
		if !errors.Is(err, advisory.ErrLockLost) {
			t.Fatalf("Up = %v; want an error matching advisory.ErrLockLost", err)
		}
		if v, dirty := migrationState(t, d.DB); v != 1 || !dirty {
			t.Errorf("schema_migrations = (%d, dirty %v); want (1, dirty)", v, dirty)
		}
		if got := appliedCounts(t, d.DB); got[1] != 1 || got[2] != 0 {
			t.Errorf("migrations that ran: %v; want 1 once and 2 never", got)
		}
		pgtest.AwaitGone(t, d.DB, pid)
		pgtest.AwaitFree(t, d.DB, key)
	})
}

// TestLockTimeoutIntegration holds the key in a session of the test's
// own and calls Lock with a LockTimeout of 300 ms, directly and through
// Up: each returns an error matching database.ErrLocked and
// advisory.ErrLockTimeout, and leaves nothing held or waiting; Up ran no
// migration. Once the key is free, Lock takes it.
func TestLockTimeoutIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		d := pgtest.NewDatabase(t, tg, "migratelock_timeout")
		conn := pgtest.Conn(t, d.DB)
		k1, k2, _ := key.Pair()
		pgtest.Exec(t, conn, "SELECT pg_catalog.pg_advisory_lock($1, $2)", k1, k2)
		holderPID := pgtest.PID(t, conn)
		m, drv := newMigrate(t, d, migratelock.Config{LockTimeout: 300 * time.Millisecond})

		for what, lock := range map[string]func() error{"Lock": drv.Lock, "Up": m.Up} {
			err := lock()
			if !errors.Is(err, database.ErrLocked) || !errors.Is(err, advisory.ErrLockTimeout) {
				t.Errorf("%s = %v; want an error matching database.ErrLocked and advisory.ErrLockTimeout", what, err)
			}
			pgtest.Await(t, "the waiter to leave the key", func() (bool, error) {
				locks, err := pgtest.LocksOf(t.Context(), d.DB, key)
				return len(locks) == 1 && locks[0].PID == holderPID, err
			})
		}
		var n int
		if err := d.DB.QueryRow("SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = 'public' AND tablename = 'applied'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Error("a migration ran although Lock failed")
		}

		pgtest.Exec(t, conn, "SELECT pg_catalog.pg_advisory_unlock($1, $2)", k1, k2)
		if err := drv.Lock(); err != nil {
			t.Fatalf("Lock on a free key = %v", err)
		}
		if err := drv.Unlock(); err != nil {
			t.Fatalf("Unlock = %v", err)
		}
		pgtest.AwaitFree(t, d.DB, key)
	})
}
