// Command pgxworkers shows transaction locks on pgx's own API handing out
// jobs exactly once: the workers example, on a *pgxpool.Pool with no
// database/sql in between.
//
// Eight workers share one pgx pool and 200 jobs. Each worker picks a job
// that looks undone, at random so that workers often pick the same one,
// and runs it under [pgxlock.WithXactLock] with [advisory.Try]: the worker
// that gets the job's lock runs it, in the lock's transaction (a pgx.Tx),
// and the others skip it. The lock ends when the job's transaction
// commits. At the end the program counts in the database how often each
// job ran.
//
//	go -C examples run ./pgxworkers [-jobs 200] [-workers 8]
//
// It uses the database in DATABASE_URL when that is set, creating and then
// dropping a schema of its own. Otherwise it starts a disposable PostgreSQL
// (in Docker, or from local initdb and postgres binaries) and removes it
// when it ends.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
	"github.com/pgadvisory/pgadvisory/pgxlock"
)

// jobsNS is the lock namespace of jobs: job 7's key is PairKey(jobsNS, 7).
const jobsNS = 1

func main() {
	n := flag.Int("jobs", 200, "number of jobs")
	workers := flag.Int("workers", 8, "number of workers")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout, *n, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "pgxworkers:", err)
		os.Exit(1)
	}
}

// run opens a pool of one connection per worker, creates n jobs, lets the
// workers run them, and prints how often each job ran.
func run(ctx context.Context, out io.Writer, n, workers int) error {
	if n < 1 || workers < 1 || workers > math.MaxInt32 {
		return fmt.Errorf("need at least one job and one worker, got %d and %d", n, workers)
	}
	pool, about, closePool, err := pgtest.OpenExamplePool(ctx, out, func(c *pgxpool.Config) { c.MaxConns = int32(workers) })
	if err != nil {
		return err
	}
	defer closePool()
	fmt.Fprintln(out, about)

	jobs, err := createJobs(ctx, pool, n)
	if err != nil {
		return err
	}
	defer jobs.drop()

	tallies, err := runWorkers(ctx, pool, jobs, workers)
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
func runWorkers(ctx context.Context, pool *pgxpool.Pool, jobs *jobs, workers int) ([]tally, error) {
	tallies := make([]tally, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() { tallies[i], errs[i] = work(ctx, pool, jobs, i+1) })
	}
	wg.Wait()
	return tallies, errors.Join(errs...)
}

// work is one worker: it runs jobs until none is left.
func work(ctx context.Context, pool *pgxpool.Pool, jobs *jobs, worker int) (tally, error) {
	var t tally
	for {
		id, err := jobs.pick(ctx)
		if errors.Is(err, pgx.ErrNoRows) {
			return t, nil // every job is done
		}
		if err != nil {
			return t, err
		}
		ran := false
		err = pgxlock.WithXactLock(ctx, pool, advisory.PairKey(jobsNS, id), func(ctx context.Context, tx pgx.Tx) error {
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
