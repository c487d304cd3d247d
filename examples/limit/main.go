// Command limit shows a concurrency limit across processes with
// [semaphore.Semaphore]: twelve workers share three slots of a named
// resource, and never more than three work at once. The workers share a
// pool here for brevity; in production they would be separate processes,
// and the limit would hold the same way.
//
//	go -C examples run ./limit [-driver pq|pgx|pgxpool] [-workers 12] [-slots 3] [-jobs 5]
//
// With -driver pgxpool it runs on a *pgxpool.Pool, as a program on pgx's
// own API does.
//
// It uses the database in DATABASE_URL when that is set. Otherwise it
// starts a disposable PostgreSQL (in Docker, or from local initdb and
// postgres binaries) and removes it when it ends.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/semaphore"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// encoderKey is the base key of the resource's slots: slot i is
// PairKey(2, HashText("image-encoder")+i).
var encoderKey = advisory.NameKey(2, "image-encoder")

func main() {
	driver := flag.String("driver", "pq", "pq or pgx (database/sql drivers), or pgxpool (a pgx pool through stdlib.OpenDBFromPool)")
	workers := flag.Int("workers", 12, "number of workers")
	slots := flag.Int("slots", 3, "how many may work at once")
	jobs := flag.Int("jobs", 5, "jobs per worker")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, *driver, *workers, *slots, *jobs); err != nil {
		fmt.Fprintln(os.Stderr, "limit:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, driver string, workers, slots, jobs int) error {
	if workers < 1 || slots < 1 || jobs < 1 {
		return fmt.Errorf("need at least one worker, slot and job, got %d, %d and %d", workers, slots, jobs)
	}
	// With -driver pgxpool, db is stdlib.OpenDBFromPool(pool), as a program
	// on pgx's own API writes it: the recipe takes a *sql.DB because it is
	// built on advisory, which runs on database/sql with any driver.
	db, about, closeDB, err := pgtest.OpenExample(ctx, driver, out)
	if err != nil {
		return err
	}
	defer closeDB()
	fmt.Fprintln(out, about)

	s := semaphore.New(db, encoderKey, slots)
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Go(func() {
			for range jobs {
				l, err := s.Acquire(ctx)
				if err != nil {
					errs[w] = err
					return
				}
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(10 * time.Millisecond) // the work, under l.Context() in real code
				inside.Add(-1)
				if err := l.Release(ctx); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Fprintf(out, "%d workers ran %d jobs, at most %d at once (limit %d)\n", workers, workers*jobs, most.Load(), slots)
	if int(most.Load()) > slots {
		return fmt.Errorf("the limit of %d was exceeded: %d at once", slots, most.Load())
	}
	return nil
}
