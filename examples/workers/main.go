// Command workers shows transaction locks handing out jobs exactly once.
//
// Eight workers share one connection pool and 200 jobs. Each worker picks a
// job that looks undone, at random so that workers often pick the same one,
// and runs it under [advisory.WithXactLock] with [advisory.Try]: the worker
// that gets the job's lock runs it, in the lock's transaction, and the
// others skip it. The lock ends when the job's transaction commits. At the
// end the program counts in the database how often each job ran.
//
//	go -C examples run ./workers [-driver pq|pgx] [-jobs 200] [-workers 8]
//
// It uses the database in DATABASE_URL when that is set, creating and then
// dropping a schema of its own. Otherwise it starts a disposable PostgreSQL
// (in Docker, or from local initdb and postgres binaries) and removes it
// when it ends.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// jobsNS is the lock namespace of jobs: job 7's key is PairKey(jobsNS, 7).
const jobsNS = 1

func main() {
	driver := flag.String("driver", "pq", "database/sql driver: pq or pgx")
	n := flag.Int("jobs", 200, "number of jobs")
	workers := flag.Int("workers", 8, "number of workers")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout, *driver, *n, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "workers:", err)
		os.Exit(1)
	}
}

// run opens the database, creates n jobs, lets the workers run them, and
// prints how often each job ran.
func run(ctx context.Context, out io.Writer, driver string, n, workers int) error {
	if n < 1 || workers < 1 {
		return fmt.Errorf("need at least one job and one worker, got %d and %d", n, workers)
	}
	db, about, closeDB, err := pgtest.OpenExample(ctx, driver, out)
	if err != nil {
		return err
	}
	defer closeDB()
	fmt.Fprintln(out, about)

	jobs, err := createJobs(ctx, db, n)
	if err != nil {
		return err
	}
	defer jobs.drop()

	tallies, err := runWorkers(ctx, db, jobs, workers)
	if err != nil {
		return err
	}
	for i, t := range tallies {
		fmt.Fprintf(out, "worker %d ran %d jobs and skipped %d that another worker had locked\n", i+1, t.done, t.skipped)
	}
	once, err := jobs.ranOnce(ctx)
	if err != nil {
		return err
	}
	if once != n {
		return fmt.Errorf("only %d of %d jobs ran exactly once", once, n)
	}
	fmt.Fprintf(out, "exactly once: all %d jobs ran once\n", n)
	return nil
}

// tally is what one worker did.
type tally struct {
	done    int // jobs it ran
	skipped int // jobs whose lock another worker held, or that were done by the time it had the lock
}

// runWorkers runs the workers on one pool until no job is left.
func runWorkers(ctx context.Context, db *sql.DB, jobs *jobs, workers int) ([]tally, error) {
	db.SetMaxOpenConns(workers)
	tallies := make([]tally, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() { tallies[i], errs[i] = work(ctx, db, jobs, i+1) })
	}
	wg.Wait()
	return tallies, errors.Join(errs...)
}

// work is one worker: it runs jobs until none is left.
func work(ctx context.Context, db *sql.DB, jobs *jobs, worker int) (tally, error) {
	var t tally
	for {
		id, err := jobs.pick(ctx)
		if errors.Is(err, sql.ErrNoRows) {
			return t, nil // every job is done
		}
		if err != nil {
			return t, err
		}
		ran := false
		err = advisory.WithXactLock(ctx, db, advisory.PairKey(jobsNS, id), func(ctx context.Context, tx *sql.Tx) error {
			// No other worker runs job id now, but one may have run
			// it between the pick and the lock: look again.
			if done, err := jobs.done(ctx, tx, id); err != nil || done {
				return err
			}
			ran = true
			return jobs.run(ctx, tx, id, worker) // commits with the lock's transaction
		}, advisory.Try())
		switch {
		case errors.Is(err, advisory.ErrNotAcquired):
			t.skipped++ // another worker is running it
		case err != nil:
			return t, fmt.Errorf("worker %d, job %d: %w", worker, id, err)
		case ran:
			t.done++
		default:
			t.skipped++ // another worker ran it since the pick
		}
	}
}
