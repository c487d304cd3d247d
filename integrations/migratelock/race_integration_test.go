package migratelock_test

import (
	"errors"
	"testing"

	"github.com/golang-migrate/migrate/v4"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/integrations/migratelock"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// TestTwoInstancesRaceIntegration runs two Migrates, on two pools as two
// processes would, at once on one database. The first to get the lease
// stops in its first migration while the test holds the gate; the test
// sees the other wait for the lease meanwhile. Once the gate opens, one
// Up applies both migrations and returns nil, the other finds nothing
// to do (migrate.ErrNoChange), each migration ran once, and the version
// table ends at version 2, clean.
func TestTwoInstancesRaceIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		d := pgtest.NewDatabase(t, tg, "migratelock_race")
		open := holdGate(t, d.DB)
		cfg := migratelock.Config{LockTimeout: pgtest.PollTimeout}
		ms := [2]*migrate.Migrate{}
		for i := range ms {
			ms[i], _ = newMigrate(t, d, cfg)
			ms[i].LockTimeout = 2 * pgtest.PollTimeout
		}
		done := make(chan error, len(ms))
		for _, m := range ms {
			go func() { done <- m.Up() }()
		}
		pgtest.AwaitWaiting(t, d.DB, key)
		pgtest.AwaitWaiting(t, d.DB, advisory.Int64Key(gateKey))
		open()

		var applied, unchanged int
		for range ms {
			switch err := <-done; {
			case err == nil:
				applied++
			case errors.Is(err, migrate.ErrNoChange):
				unchanged++
			default:
				t.Fatalf("Up: %v", err)
			}
		}
		if applied != 1 || unchanged != 1 {
			t.Fatalf("%d Ups applied and %d found no change; want one each", applied, unchanged)
		}
		for v, n := range appliedCounts(t, d.DB) {
			if n != 1 {
				t.Errorf("migration %d ran %d times; want once", v, n)
			}
		}
		if got := appliedCounts(t, d.DB); len(got) != 2 {
			t.Errorf("migrations that ran: %v; want 1 and 2", got)
		}
		if v, dirty := migrationState(t, d.DB); v != 2 || dirty {
			t.Errorf("schema_migrations = (%d, dirty %v); want (2, clean)", v, dirty)
		}
		pgtest.AwaitFree(t, d.DB, key)
	})
}
