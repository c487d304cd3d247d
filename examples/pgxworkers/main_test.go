package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgadvisory/pgadvisory/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// eachServer runs f in a subtest per server of pgtest.Servers, named
// "pg15", "pg17". The example has no driver to vary: it is pgx's own API.
func eachServer(t *testing.T, f func(t *testing.T, s *pgtest.Server)) {
	t.Helper()
	for _, s := range pgtest.Servers(t) {
		t.Run(s.Name, func(t *testing.T) { f(t, s) })
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
// job has exactly one execution, by the worker named in done_by.
type proof struct {
	Jobs      int // rows in jobs
	Runs      int // rows in runs: one per execution
	Undone    int // jobs with no done_by
	NotOnce   int // jobs whose execution count is not exactly 1
	Mismatch  int // jobs whose execution was by another worker than done_by
	DoneTotal int // executions the workers counted
}

// ok reports whether every job ran exactly once.
func (p proof) ok() bool {
	return p.Runs == p.Jobs && p.Undone == 0 && p.NotOnce == 0 && p.Mismatch == 0 && p.DoneTotal == p.Jobs
}

// prove counts, in the database, how often each job ran.
func prove(t *testing.T, ctx context.Context, j *jobs) proof {
	t.Helper()
	var p proof
	q := `SELECT
		(SELECT count(*) FROM ` + j.t("jobs") + `),
		(SELECT count(*) FROM ` + j.t("runs") + `),
		(SELECT count(*) FROM ` + j.t("jobs") + ` WHERE done_by IS NULL),
		(SELECT count(*) FROM ` + j.t("jobs") + ` j
			WHERE (SELECT count(*) FROM ` + j.t("runs") + ` r WHERE r.job_id = j.id) <> 1),
		(SELECT count(*) FROM ` + j.t("jobs") + ` j
			WHERE EXISTS (SELECT FROM ` + j.t("runs") + ` r WHERE r.job_id = j.id AND r.worker IS DISTINCT FROM j.done_by))`
	if err := j.pool.QueryRow(ctx, q).Scan(&p.Jobs, &p.Runs, &p.Undone, &p.NotOnce, &p.Mismatch); err != nil {
		t.Fatalf("check the runs: %v", err)
	}
	return p
}

// TestWorkers runs the workers on every server and checks, by the
// database's count, that every job ran exactly once, by the worker that
// marked it done, and as often as the workers say, and that every
// connection went back to the pool.
func TestWorkers(t *testing.T) {
	t.Parallel()
	eachServer(t, func(t *testing.T, s *pgtest.Server) {
		t.Parallel()
		const n, workers = 60, 6
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		pool := newPool(t, s, workers)
		j, err := createJobs(ctx, pool, n)
		if err != nil {
			t.Fatal(err)
		}
		defer j.drop()

		tallies, err := runWorkers(ctx, pool, j, workers)
		if err != nil {
			t.Fatalf("runWorkers: %v", err)
		}
		if len(tallies) != workers {
			t.Errorf("%d worker tallies, want %d", len(tallies), workers)
		}
		p := prove(t, ctx, j)
		skipped := 0
		for _, tl := range tallies {
			p.DoneTotal += tl.done
			skipped += tl.skipped
		}
		if !p.ok() {
			t.Fatalf("not exactly once: %+v", p)
		}
		if p.Jobs != n || p.Runs != n {
			t.Errorf("jobs %d, runs %d; want %d each", p.Jobs, p.Runs, n)
		}
		// The program's own check agrees with the proof.
		if once, err := j.ranOnce(ctx); err != nil || once != n {
			t.Errorf("ranOnce = %d, %v; want %d", once, err, n)
		}
		if acquired := pool.Stat().AcquiredConns(); acquired != 0 {
			t.Errorf("%d connections still acquired", acquired)
		}
		t.Logf("skipped %d", skipped)
	})
}

// TestProgram runs the program as main does, through DATABASE_URL, on
// every server, and checks what it prints.
func TestProgram(t *testing.T) {
	eachServer(t, func(t *testing.T, s *pgtest.Server) {
		t.Setenv("DATABASE_URL", s.DSN)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var out strings.Builder
		if err := run(ctx, &out, 40, 4); err != nil {
			t.Fatalf("run: %v\n%s", err, out.String())
		}
		for _, want := range []string{
			"(DATABASE_URL)\n",
			"worker 4 ran ",
			"exactly once: all 40 jobs ran once\n",
		} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, out.String())
			}
		}
	})
}

// TestRunBadConfig checks that a run with nothing to do is refused before
// it touches the database.
func TestRunBadConfig(t *testing.T) {
	// A database that cannot be reached: reaching for it fails otherwise.
	t.Setenv("DATABASE_URL", "postgres://nobody@invalid.invalid/none")
	tests := []struct {
		name       string
		n, workers int
	}{
		{"NoJobs", 0, 1},
		{"NoWorkers", 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(context.Background(), &strings.Builder{}, tt.n, tt.workers)
			if err == nil || !strings.Contains(err.Error(), "need at least one job and one worker") {
				t.Fatalf("run(%d jobs, %d workers) = %v; want it refused", tt.n, tt.workers, err)
			}
		})
	}
}

// TestProofDetectsFailure checks that the proof rejects the outcomes it
// exists to catch.
func TestProofDetectsFailure(t *testing.T) {
	t.Parallel()
	good := proof{Jobs: 3, Runs: 3, DoneTotal: 3}
	if !good.ok() {
		t.Fatalf("%+v should pass", good)
	}
	tests := []struct {
		name string
		edit func(*proof)
	}{
		{"JobTwice", func(p *proof) { p.Runs, p.NotOnce = 4, 1 }},
		{"JobMissed", func(p *proof) { p.Runs, p.Undone, p.NotOnce = 2, 1, 1 }},
		{"WrongWorker", func(p *proof) { p.Mismatch = 1 }},
		{"WorkersMiscount", func(p *proof) { p.DoneTotal = 4 }},
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
