package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// config says how big a run is.
type config struct {
	Jobs    int           // jobs to create
	Workers int           // goroutines competing for them
	Work    time.Duration // how long one job's work takes, inside its transaction
}

// The job types. A job's lock key is PairKey(type, id), so job 7 of one
// type and job 7 of another never share a lock.
var jobTypes = []struct {
	ID   int32
	Name string
}{
	{1, "email"},
	{2, "invoice"},
}

// tally is what one worker did.
type tally struct {
	Done    int // jobs it ran
	Skipped int // candidates whose lock another worker held (ErrNotAcquired)
	Stale   int // candidates it locked but found already done by then
}

// report is the outcome of a run.
type report struct {
	Workers []tally
	Total   tally
	Proof   proof
}

// proof is what the database says after the run. A run is correct when
// every job has exactly one execution, by the worker named in done_by.
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

// run creates cfg.Jobs jobs in a schema of its own on db, lets cfg.Workers
// workers compete for them until all are done, checks that each ran exactly
// once, and drops the schema. It writes a short account to out. db should
// allow cfg.Workers open connections.
func run(ctx context.Context, db *sql.DB, cfg config, out io.Writer) (report, error) {
	if cfg.Jobs < 1 || cfg.Workers < 1 {
		return report{}, fmt.Errorf("workers: need at least one job and one worker, got %d and %d", cfg.Jobs, cfg.Workers)
	}
	s, err := newStore(ctx, db)
	if err != nil {
		return report{}, err
	}
	defer s.drop()
	if err := s.seed(ctx, cfg.Jobs); err != nil {
		return report{}, err
	}

	rep := report{Workers: make([]tally, cfg.Workers)}
	start := time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for w := range cfg.Workers {
		wg.Go(func() {
			if err := s.work(ctx, int32(w+1), cfg.Work, &rep.Workers[w]); err != nil {
				once.Do(func() { first = fmt.Errorf("workers: worker %d: %w", w+1, err); cancel() })
			}
		})
	}
	wg.Wait()
	if first != nil {
		return rep, first
	}
	elapsed := time.Since(start)

	for _, t := range rep.Workers {
		rep.Total.Done += t.Done
		rep.Total.Skipped += t.Skipped
		rep.Total.Stale += t.Stale
	}
	rep.Proof, err = s.prove(ctx)
	if err != nil {
		return rep, err
	}
	rep.Proof.DoneTotal = rep.Total.Done
	printReport(out, rep, elapsed)
	return rep, nil
}

// printReport writes the per-worker table and the proof.
func printReport(out io.Writer, rep report, elapsed time.Duration) {
	fmt.Fprintf(out, "%-8s %5s %8s %6s\n", "worker", "done", "skipped", "stale")
	for i, t := range rep.Workers {
		fmt.Fprintf(out, "%-8d %5d %8d %6d\n", i+1, t.Done, t.Skipped, t.Stale)
	}
	fmt.Fprintf(out, "%-8s %5d %8d %6d   in %v\n", "total", rep.Total.Done, rep.Total.Skipped, rep.Total.Stale, elapsed.Round(time.Millisecond))
	fmt.Fprintln(out, "(skipped: another worker held the job's lock; stale: locked, but already done by then)")
	p := rep.Proof
	if p.ok() {
		fmt.Fprintf(out, "exactly once: all %d jobs ran once (%d runs, none twice, none missed)\n", p.Jobs, p.Runs)
		return
	}
	fmt.Fprintf(out, "NOT exactly once: %d jobs, %d runs, %d undone, %d not run exactly once, %d done_by mismatches, %d counted by workers\n",
		p.Jobs, p.Runs, p.Undone, p.NotOnce, p.Mismatch, p.DoneTotal)
}

// store is the run's tables, in a schema of their own so that runs on one
// database never meet.
type store struct {
	db     *sql.DB
	schema string // a quoted identifier
}

// newStore creates a fresh schema with the jobs and runs tables.
func newStore(ctx context.Context, db *sql.DB) (*store, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	// The name is only lower-case hex, so quoting it is enough.
	s := &store{db: db, schema: `"pgadvisory_workers_` + hex.EncodeToString(b[:]) + `"`}
	ddl := []string{
		"CREATE SCHEMA " + s.schema,
		"CREATE TABLE " + s.t("jobs") + ` (
			id      int PRIMARY KEY,
			type    int NOT NULL,
			done_by int,
			done_at timestamptz)`,
		// One row per execution of a job: the proof counts them.
		"CREATE TABLE " + s.t("runs") + ` (
			job_id int NOT NULL REFERENCES ` + s.t("jobs") + `,
			worker int NOT NULL,
			at     timestamptz NOT NULL DEFAULT now())`,
	}
	for i, q := range ddl {
		if _, err := db.ExecContext(ctx, q); err != nil {
			if i > 0 {
				s.drop()
			}
			return nil, fmt.Errorf("workers: create tables: %w", err)
		}
	}
	return s, nil
}

// t returns the qualified name of one of the store's tables.
func (s *store) t(name string) string { return s.schema + "." + name }

// drop removes the schema and its tables, even after ctx ended.
func (s *store) drop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = s.db.ExecContext(ctx, "DROP SCHEMA "+s.schema+" CASCADE")
}

// seed inserts jobs 1..n, alternating between the job types.
func (s *store) seed(ctx context.Context, n int) error {
	ids := make([]string, len(jobTypes))
	for i, jt := range jobTypes {
		ids[i] = fmt.Sprint(jt.ID)
	}
	q := "INSERT INTO " + s.t("jobs") + " (id, type) SELECT g, (ARRAY[" + strings.Join(ids, ",") +
		"])[1 + g % " + fmt.Sprint(len(jobTypes)) + "] FROM generate_series(1, $1::int) AS g"
	if _, err := s.db.ExecContext(ctx, q, n); err != nil {
		return fmt.Errorf("workers: create jobs: %w", err)
	}
	return nil
}

// work is one worker's loop: pick any job that looks undone, try to lock
// it, and run it in the lock's transaction. It returns when no job is left.
//
// The pick is deliberately racy: several workers often pick the same job.
// The lock decides who runs it, and the re-check under the lock catches a
// job that another worker finished between the pick and the lock.
func (s *store) work(ctx context.Context, worker int32, d time.Duration, t *tally) error {
	pick := "SELECT id, type FROM " + s.t("jobs") + " WHERE done_by IS NULL ORDER BY random() LIMIT 1"
	check := "SELECT done_by IS NOT NULL FROM " + s.t("jobs") + " WHERE id = $1"
	record := "INSERT INTO " + s.t("runs") + " (job_id, worker) VALUES ($1, $2)"
	finish := "UPDATE " + s.t("jobs") + " SET done_by = $2, done_at = now() WHERE id = $1"
	for {
		var id, typ int32
		err := s.db.QueryRowContext(ctx, pick).Scan(&id, &typ)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // every job is done
		}
		if err != nil {
			return fmt.Errorf("pick a job: %w", err)
		}

		stale := false
		err = advisory.WithXactLock(ctx, s.db, advisory.PairKey(typ, id), func(ctx context.Context, tx *sql.Tx) error {
			// The lock is held: nobody else runs this job now. It may
			// have been finished since the pick, though.
			if err := tx.QueryRowContext(ctx, check, id).Scan(&stale); err != nil || stale {
				return err
			}
			// The job's work, and its record, commit together with
			// done_by. The lock ends with the commit.
			if _, err := tx.ExecContext(ctx, record, id, worker); err != nil {
				return err
			}
			time.Sleep(d)
			_, err := tx.ExecContext(ctx, finish, id, worker)
			return err
		}, advisory.Try())
		switch {
		case errors.Is(err, advisory.ErrNotAcquired):
			t.Skipped++ // another worker is running it
		case err != nil:
			return fmt.Errorf("job %d: %w", id, err)
		case stale:
			t.Stale++
		default:
			t.Done++
		}
	}
}

// prove counts, in the database, how often each job ran.
func (s *store) prove(ctx context.Context) (proof, error) {
	var p proof
	q := `SELECT
		(SELECT count(*) FROM ` + s.t("jobs") + `),
		(SELECT count(*) FROM ` + s.t("runs") + `),
		(SELECT count(*) FROM ` + s.t("jobs") + ` WHERE done_by IS NULL),
		(SELECT count(*) FROM ` + s.t("jobs") + ` j
			WHERE (SELECT count(*) FROM ` + s.t("runs") + ` r WHERE r.job_id = j.id) <> 1),
		(SELECT count(*) FROM ` + s.t("jobs") + ` j
			WHERE EXISTS (SELECT FROM ` + s.t("runs") + ` r WHERE r.job_id = j.id AND r.worker IS DISTINCT FROM j.done_by))`
	if err := s.db.QueryRowContext(ctx, q).Scan(&p.Jobs, &p.Runs, &p.Undone, &p.NotOnce, &p.Mismatch); err != nil {
		return p, fmt.Errorf("workers: check the runs: %w", err)
	}
	return p, nil
}
