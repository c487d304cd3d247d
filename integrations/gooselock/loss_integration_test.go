package gooselock_test

import (
	"context"
	"testing"
	"testing/fstest"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/integrations/gooselock"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// TestLeaseLostIntegration terminates, with pg_terminate_backend, the
// backend that holds the lease while the first migration waits at the
// gate. The SessionLocker's backend is the migration's own, which the
// termination ends; the Locker's is another, and the heartbeat's loss
// cancels the context from CancelOnLoss, which ends the migration's wait.
// Either way Up fails with an error matching advisory.ErrLockLost, the
// context's cause matches it too, the migration's transaction rolled back
// (goose recorded no version), and nothing is left held: a new Provider
// then applies both migrations.
func TestLeaseLostIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		for _, k := range kinds {
			t.Run(k.name, func(t *testing.T) {
				d := pgtest.NewDatabase(t, tg, "gooselock_loss")
				open := holdGate(t, d.DB)
				p := newProvider(t, d.DB, gatedMigrations, k.option(t, gooselock.DefaultKey, gooselock.Heartbeat(100*time.Millisecond)))
				ctx, cancel := gooselock.CancelOnLoss(context.Background())
				defer cancel()
				done := make(chan error, 1)
				go func() {
					_, err := p.Up(ctx)
					done <- err
				}()
				pgtest.AwaitWaiting(t, d.DB, advisory.Int64Key(gateKey))
				pid := pgtest.AwaitHolder(t, d.DB, gooselock.DefaultKey)
				pgtest.Exec(t, d.DB, "SELECT pg_catalog.pg_terminate_backend($1)", pid)

				var err error
				select {
				case err = <-done:
				case <-time.After(pgtest.PollTimeout):
					t.Fatalf("Up did not return within %v of the lease's loss", pgtest.PollTimeout)
				}
				requireLost(t, "Up", err)
				requireLost(t, "context.Cause(ctx)", context.Cause(ctx))
				if got := versionCounts(t, d.DB); got[1] != 0 || got[2] != 0 {
					t.Errorf("goose recorded %v after the loss; want neither version 1 nor 2", got)
				}
				pgtest.AwaitGone(t, d.DB, pid)
				open()
				pgtest.AwaitFree(t, d.DB, gooselock.DefaultKey)

				again := newProvider(t, d.DB, gatedMigrations, k.option(t, gooselock.DefaultKey))
				res, err := again.Up(context.Background())
				if err != nil || len(res) != 2 {
					t.Fatalf("Up after the loss applied %d migrations, err %v; want 2, nil", len(res), err)
				}
			})
		}
	})
}

// unlockAllMigrations is one migration that releases every session lock
// of the session it runs on, goose's lock among them when it is on that
// session, and records that session's pid.
var unlockAllMigrations = fstest.MapFS{
	"00001_unlock.sql": {Data: []byte(`-- +goose Up
CREATE TABLE public.pids (pid int NOT NULL);
SELECT pg_catalog.pg_advisory_unlock_all();
INSERT INTO public.pids VALUES (pg_catalog.pg_backend_pid());
-- +goose Down
DROP TABLE public.pids;
`)},
}

// TestUnlockFailureDiscardsIntegration runs a migration that releases the
// lock behind the locker's back, on the session that holds it, so that
// the unlock finds the key not held. The SessionLocker reports
// advisory.ErrLockLost and closes the session: its backend ends, and the
// pool never hands it out again. goose's own PostgreSQL session locker,
// run the same way for comparison, fails its unlock too but leaves the
// session in the pool: its backend lives on.
func TestUnlockFailureDiscardsIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		cases := []struct {
			name    string
			locker  func(t *testing.T) lock.SessionLocker
			discard bool // the session is closed after the failed unlock
		}{
			{"gooselock", func(t *testing.T) lock.SessionLocker {
				l, err := gooselock.NewSessionLocker(gooselock.DefaultKey)
				if err != nil {
					t.Fatal(err)
				}
				return l
			}, true},
			{"goose", func(t *testing.T) lock.SessionLocker {
				l, err := lock.NewPostgresSessionLocker(lock.WithUnlockTimeout(1, 1))
				if err != nil {
					t.Fatal(err)
				}
				return l
			}, false},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				d := pgtest.NewDatabase(t, tg, "gooselock_unlock")
				p := newProvider(t, d.DB, unlockAllMigrations, goose.WithSessionLocker(c.locker(t)))
				_, err := p.Up(context.Background())
				if err == nil {
					t.Fatal("Up = nil; want the unlock's failure")
				}
				if c.discard {
					requireLost(t, "Up", err)
				}
				var pid int
				if err := d.DB.QueryRow("SELECT pid FROM public.pids").Scan(&pid); err != nil {
					t.Fatal(err)
				}
				if c.discard {
					pgtest.AwaitGone(t, d.DB, pid)
					return
				}
				var n int
				if err := d.DB.QueryRow("SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE pid = $1", pid).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n != 1 {
					t.Errorf("goose's locker: backend %d after the failed unlock: %d sessions; want it pooled, alive", pid, n)
				}
			})
		}
	})
}
