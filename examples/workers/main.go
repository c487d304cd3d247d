// Command workers shows transaction locks handing out jobs exactly once.
//
// Eight workers share one connection pool and compete for 200 jobs. Each
// picks a job that looks undone, at random so that workers often collide,
// and tries to lock it with [advisory.WithXactLock] and [advisory.Try] on
// the key PairKey(job type, job id). The worker that gets the lock checks
// the job again and marks it done in the same transaction; the lock ends
// with the commit. A worker that does not get the lock skips the job. At the
// end the program counts, in the database, how often each job ran, and
// exits with status 1 unless every job ran exactly once.
//
//	go run ./examples/workers [-driver pq|pgx] [-jobs 200] [-workers 8]
//
// It uses the database in DATABASE_URL when that is set, creating and then
// dropping a schema of its own. Otherwise it uses the first server of
// PGADVISORY_TEST_DSN, or starts a disposable PostgreSQL: in Docker if it
// can, else from local initdb and postgres binaries.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/pgtest"
)

func main() { os.Exit(mainCode()) }

// mainCode runs the program and returns its exit status, so that deferred
// clean-up runs before the process exits.
func mainCode() int {
	driver := flag.String("driver", "pq", "database/sql driver: pq (github.com/lib/pq) or pgx (github.com/jackc/pgx/v5/stdlib)")
	cfg := config{}
	flag.IntVar(&cfg.Jobs, "jobs", 200, "number of jobs")
	flag.IntVar(&cfg.Workers, "workers", 8, "number of workers")
	flag.DurationVar(&cfg.Work, "work", time.Millisecond, "how long each job's work takes, inside its transaction")
	flag.Parse()
	if (*driver != pgtest.DriverPQ && *driver != pgtest.DriverPGX) || flag.NArg() > 0 {
		flag.Usage()
		return 2
	}

	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()

	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	db, about, closeDB, err := pgtest.OpenExample(ctx, *driver, os.Stdout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "workers: %v\n", err)
		return 1
	}
	defer closeDB()
	db.SetMaxOpenConns(cfg.Workers)
	db.SetMaxIdleConns(cfg.Workers)
	fmt.Printf("%d workers, %d jobs, driver %s, %s\n", cfg.Workers, cfg.Jobs, *driver, about)

	rep, err := run(ctx, db, cfg, os.Stdout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		return 1
	}
	if !rep.Proof.ok() {
		return 1
	}
	return 0
}
