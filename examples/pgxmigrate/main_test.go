package main

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// testWait is how long the tests' runners wait for the lock.
const testWait = 30 * time.Second

// eachServer runs f in a subtest per server of pgtest.Servers, named
// "pg15", "pg17", with an observer pool on lib/pq, which shares nothing
// with the pgx pools under test. The example has no driver to vary: it is
// pgx's own API.
func eachServer(t *testing.T, f func(t *testing.T, s *pgtest.Server, obs *sql.DB)) {
	t.Helper()
	for _, s := range pgtest.Servers(t) {
		t.Run(s.Name, func(t *testing.T) { f(t, s, s.Open(t, pgtest.DriverPQ)) })
	}
}

// newPool opens a pgx pool of at most maxConns connections on s, closed at
// t's cleanup.
func newPool(t *testing.T, s *pgtest.Server, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(s.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

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
	if err := m.pool.QueryRow(ctx, q).Scan(&p.Listed, &p.Applied, &p.NotOnce, &p.Mismatch, &p.Accounts); err != nil {
		t.Fatalf("check the steps: %v", err)
	}
	return p
}

// TestRunnersAtOnce starts runners together on every server and checks, by
// the database's count, that each step was applied exactly once, that
// every runner succeeded, that the steps a runner reports skipping were
// applied by another, and that every connection went back to the pool.
func TestRunnersAtOnce(t *testing.T) {
	t.Parallel()
	eachServer(t, func(t *testing.T, s *pgtest.Server, obs *sql.DB) {
		t.Parallel()
		for _, runners := range []int{2, 5} {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			pool := newPool(t, s, int32(runners)+1)
			m, err := newMigrator(ctx, pool, testWait)
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
			if acquired := pool.Stat().AcquiredConns(); acquired != 0 {
				t.Errorf("%d connections still acquired", acquired)
			}
			pgtest.AwaitFree(t, obs, m.key)
		}
	})
}

// TestRunnerLosesSession ends the session of the runner that holds the
// lock in the middle of step 3, on every server. That runner's step rolls
// back with its session, and its scope returns an error; the runner
// waiting for the lock then applies step 3 and step 4. Every step is still
// applied exactly once, and the pool destroyed the dead connection.
func TestRunnerLosesSession(t *testing.T) {
	t.Parallel()
	eachServer(t, func(t *testing.T, s *pgtest.Server, obs *sql.DB) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		pool := newPool(t, s, 3)
		m, err := newMigrator(ctx, pool, testWait)
		if err != nil {
			t.Fatal(err)
		}
		defer m.drop()

		// The first runner to reach step 3 says so and waits until the
		// other runner waits for the lock; then another session ends its
		// own, as a failover would, while the step's transaction is open.
		var killed atomic.Bool
		holding, proceed := make(chan struct{}), make(chan struct{})
		m.beforeStep = func(ctx context.Context, tx pgx.Tx, runner, version int) error {
			if version != 3 || !killed.CompareAndSwap(false, true) {
				return nil
			}
			close(holding)
			select {
			case <-proceed:
			case <-ctx.Done():
				return ctx.Err()
			}
			var pid int
			if err := tx.QueryRow(ctx, "SELECT pg_catalog.pg_backend_pid()").Scan(&pid); err != nil {
				return err
			}
			if _, err := obs.ExecContext(ctx, "SELECT pg_catalog.pg_terminate_backend($1)", pid); err != nil {
				return err
			}
			// The step's next statement finds the session gone: the
			// termination ends the sleep.
			_, err := tx.Exec(ctx, "SELECT pg_catalog.pg_sleep(5)")
			return err
		}

		type result struct {
			r   report
			err error
		}
		first, second := make(chan result, 1), make(chan result, 1)
		go func() {
			r, err := m.migrate(ctx, 1)
			first <- result{r, err}
		}()
		// The second runner starts once the first holds the lock, and
		// the first goes on once the second waits for it.
		select {
		case <-holding:
		case r := <-first:
			t.Fatalf("the first runner ended before step 3: %+v, %v", r.r, r.err)
		}
		go func() {
			r, err := m.migrate(ctx, 2)
			second <- result{r, err}
		}()
		pgtest.AwaitWaiting(t, obs, m.key)
		close(proceed)
		r1, r2 := <-first, <-second
		if r2.err != nil {
			t.Fatalf("the second runner: %v", r2.err)
		}
		if r1.err == nil {
			t.Fatal("the first runner lost its session mid-step and returned nil")
		}
		t.Logf("first runner: applied %d, %v", r1.r.applied, r1.err)
		if r1.r.applied != 2 || r2.r.applied != 2 || r2.r.skipped != 2 {
			t.Errorf("first applied %d; second applied %d and skipped %d; want 2, 2, 2", r1.r.applied, r2.r.applied, r2.r.skipped)
		}
		p := prove(t, ctx, m)
		p.Runners, p.Successes, p.Reported = 1, 1, r1.r.applied+r2.r.applied
		if !p.ok() {
			t.Fatalf("not exactly once: %+v", p)
		}
		if acquired := pool.Stat().AcquiredConns(); acquired != 0 {
			t.Errorf("%d connections still acquired", acquired)
		}
	})
}

// TestWaitRunsOut holds the migration lock elsewhere, on every server:
// a runner waits for its bound, gives up with an error matching
// advisory.ErrLockTimeout, and has applied nothing; once the lock is free,
// a runner applies every step.
func TestWaitRunsOut(t *testing.T) {
	t.Parallel()
	eachServer(t, func(t *testing.T, s *pgtest.Server, obs *sql.DB) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		pool := newPool(t, s, 2)
		m, err := newMigrator(ctx, pool, 200*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		defer m.drop()

		holder := pgtest.Conn(t, obs)
		if err := advisory.Lock(ctx, holder, m.key); err != nil {
			t.Fatal(err)
		}
		r, err := m.migrate(ctx, 1)
		if !errors.Is(err, advisory.ErrLockTimeout) {
			t.Fatalf("migrate under a held lock = %v; want an error matching advisory.ErrLockTimeout", err)
		}
		var created bool
		if err := pool.QueryRow(ctx, "SELECT pg_catalog.to_regclass($1) IS NOT NULL", m.t("schema_migrations")).Scan(&created); err != nil {
			t.Fatal(err)
		}
		if r != (report{}) || created {
			t.Fatalf("a runner that never had the lock applied %d and skipped %d steps; schema_migrations created: %v", r.applied, r.skipped, created)
		}

		if err := advisory.Unlock(ctx, holder, m.key); err != nil {
			t.Fatal(err)
		}
		if r, err = m.migrate(ctx, 2); err != nil || r.applied != len(steps) {
			t.Fatalf("migrate after the release = %+v, %v; want %d steps applied", r, err, len(steps))
		}
	})
}

// TestProgram runs the program as main does, through DATABASE_URL, on
// every server, and checks what it prints.
func TestProgram(t *testing.T) {
	eachServer(t, func(t *testing.T, s *pgtest.Server, _ *sql.DB) {
		t.Setenv("DATABASE_URL", s.DSN)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var out strings.Builder
		if err := run(ctx, &out, 3, testWait); err != nil {
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

// TestRunBadConfig checks that a run with no runner, or a negative wait,
// is refused before it touches the database.
func TestRunBadConfig(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://nobody@invalid.invalid/none")
	tests := []struct {
		name    string
		runners int
		wait    time.Duration
		want    string
	}{
		{"NoRunner", 0, time.Second, "need at least one runner"},
		{"NegativeWait", 1, -time.Second, "need a wait of zero or more"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(context.Background(), &strings.Builder{}, tt.runners, tt.wait)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("run(%d runners, wait %v) = %v; want %q", tt.runners, tt.wait, err, tt.want)
			}
		})
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
