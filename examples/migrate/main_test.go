package main

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// proof is what the database says after a run. A run is correct when every
// step is listed once in schema_migrations and was applied once, by the
// runner listed there, and the data step's rows are there once.
type proof struct {
	Listed    int // rows in schema_migrations
	Applied   int // rows in applied_log: one per application
	NotOnce   int // listed steps whose application count is not exactly 1
	Mismatch  int // listed steps applied by another runner than applied_by
	Accounts  int // rows the seed step inserted
	Steps     int // len(steps)
	Reported  int // applications the runners counted
	Successes int // runners that returned nil
	Runners   int // runners started
}

// ok reports whether every step was applied exactly once and every runner
// succeeded.
func (p proof) ok() bool {
	return p.Listed == p.Steps && p.Applied == p.Steps && p.NotOnce == 0 && p.Mismatch == 0 &&
		p.Accounts == 2 && p.Reported == p.Steps && p.Successes == p.Runners
}

// prove counts, in the database, how often each step was applied.
func prove(t *testing.T, ctx context.Context, m *migrator) proof {
	t.Helper()
	p := proof{Steps: len(steps)}
	q := `SELECT
		(SELECT count(*) FROM ` + m.t("schema_migrations") + `),
		(SELECT count(*) FROM ` + m.t("applied_log") + `),
		(SELECT count(*) FROM ` + m.t("schema_migrations") + ` s
			WHERE (SELECT count(*) FROM ` + m.t("applied_log") + ` l WHERE l.version = s.version) <> 1),
		(SELECT count(*) FROM ` + m.t("schema_migrations") + ` s
			WHERE EXISTS (SELECT FROM ` + m.t("applied_log") + ` l WHERE l.version = s.version AND l.runner <> s.applied_by)),
		(SELECT count(*) FROM ` + m.t("accounts") + `)`
	if err := m.db.QueryRowContext(ctx, q).Scan(&p.Listed, &p.Applied, &p.NotOnce, &p.Mismatch, &p.Accounts); err != nil {
		t.Fatalf("check the steps: %v", err)
	}
	return p
}

// TestRunnersAtOnce starts runners together on every server and driver and
// checks, by the database's count, that each step was applied exactly
// once, that every runner succeeded, and that the steps a runner reports
// skipping were applied by another.
func TestRunnersAtOnce(t *testing.T) {
	t.Parallel()
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		for _, runners := range []int{2, 5} {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			m, err := newMigrator(ctx, tg.DB)
			if err != nil {
				t.Fatal(err)
			}
			defer m.drop()

			reports, err := runAll(ctx, m, runners)
			p := prove(t, ctx, m)
			p.Runners = runners
			if err == nil {
				p.Successes = runners
			}
			for _, r := range reports {
				p.Reported += r.applied
				if r.applied+r.skipped != len(steps) {
					t.Errorf("a runner applied %d and skipped %d of %d steps", r.applied, r.skipped, len(steps))
				}
			}
			if !p.ok() {
				t.Fatalf("%d runners: not exactly once: %+v (err %v)", runners, p, err)
			}
			if inUse := tg.DB.Stats().InUse; inUse != 0 {
				t.Errorf("%d connections still in use", inUse)
			}
		}
	})
}

// TestRunnerLosesLock ends the session of the runner that holds the lock
// in the middle of step 3, on every server and driver. That runner's step
// rolls back and its scope reports the lock lost;
// the runner waiting for the lock then applies step 3 and step 4. Every
// step is still applied exactly once.
func TestRunnerLosesLock(t *testing.T) {
	t.Parallel()
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		m, err := newMigrator(ctx, tg.DB)
		if err != nil {
			t.Fatal(err)
		}
		defer m.drop()

		var killed atomic.Bool
		m.beforeStep = func(ctx context.Context, tx *sql.Tx, runner, version int) error {
			if version != 3 || !killed.CompareAndSwap(false, true) {
				return nil
			}
			// Another session ends this one, as a failover would, while
			// the step's transaction is open.
			var pid int
			if err := tx.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
				return err
			}
			if _, err := tg.DB.ExecContext(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
				return err
			}
			// The step's next statement, or the heartbeat, finds the
			// session gone.
			_, err := tx.ExecContext(ctx, "SELECT pg_sleep(5)")
			return err
		}

		first := make(chan report, 1)
		firstErr := make(chan error, 1)
		go func() {
			r, err := m.migrate(ctx, 1)
			first <- r
			firstErr <- err
		}()
		// The second runner starts once the first holds the lock.
		waitHeld(t, ctx, tg.DB, m.key)
		second, err := m.migrate(ctx, 2)
		if err != nil {
			t.Fatalf("the second runner: %v", err)
		}
		r1, err1 := <-first, <-firstErr
		if !errors.Is(err1, advisory.ErrLockLost) {
			t.Fatalf("the first runner lost its session mid-step and returned %v; want an error matching advisory.ErrLockLost", err1)
		}
		t.Logf("first runner: applied %d, %v", r1.applied, err1)
		if r1.applied != 2 || second.applied != 2 || second.skipped != 2 {
			t.Errorf("first applied %d; second applied %d and skipped %d; want 2, 2, 2", r1.applied, second.applied, second.skipped)
		}
		p := prove(t, ctx, m)
		p.Runners, p.Successes, p.Reported = 1, 1, r1.applied+second.applied
		if !p.ok() {
			t.Fatalf("not exactly once: %+v", p)
		}
	})
}

// waitHeld waits until some session holds key.
func waitHeld(t *testing.T, ctx context.Context, db *sql.DB, key advisory.Key) {
	t.Helper()
	k1, k2, _ := key.Pair()
	for {
		var held bool
		err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory'
			AND classid = $1::int8::oid AND objid = $2::int8::oid AND objsubid = 2 AND granted)`,
			int64(uint32(k1)), int64(uint32(k2))).Scan(&held)
		if err != nil {
			t.Fatalf("wait for the lock: %v", err)
		}
		if held {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the lock was never taken: %v", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestProgram runs the program as main does, through DATABASE_URL, on
// every server and driver, and checks what it prints.
func TestProgram(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Setenv("DATABASE_URL", tg.Server.DSN)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var out strings.Builder
		if err := run(ctx, &out, tg.Driver, 3); err != nil {
			t.Fatalf("run: %v\n%s", err, out.String())
		}
		for _, want := range []string{
			"(DATABASE_URL)\n",
			"runner 3 applied ",
			"skipped 4 already applied\n",
			"exactly once: all 4 steps applied once\n",
		} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, out.String())
			}
		}
	})
}

// TestRunBadConfig checks that a run with no runner is refused before it
// touches the database.
func TestRunBadConfig(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://nobody@invalid.invalid/none")
	err := run(context.Background(), &strings.Builder{}, pgtest.DriverPQ, 0)
	if err == nil || !strings.Contains(err.Error(), "need at least one runner") {
		t.Fatalf("run(0 runners) = %v; want it refused", err)
	}
}

// TestProofDetectsFailure checks that the proof rejects the outcomes it
// exists to catch.
func TestProofDetectsFailure(t *testing.T) {
	t.Parallel()
	good := proof{Listed: 4, Applied: 4, Accounts: 2, Steps: 4, Reported: 4, Successes: 2, Runners: 2}
	if !good.ok() {
		t.Fatalf("%+v should pass", good)
	}
	tests := []struct {
		name string
		edit func(*proof)
	}{
		{"StepTwice", func(p *proof) { p.Applied, p.NotOnce = 5, 1 }},
		{"StepMissed", func(p *proof) { p.Listed, p.Applied = 3, 3 }},
		{"SeedTwice", func(p *proof) { p.Accounts = 4 }},
		{"WrongRunner", func(p *proof) { p.Mismatch = 1 }},
		{"RunnersMiscount", func(p *proof) { p.Reported = 5 }},
		{"RunnerFailed", func(p *proof) { p.Successes = 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := good
			tt.edit(&p)
			if p.ok() {
				t.Errorf("%+v passed", p)
			}
		})
	}
}
