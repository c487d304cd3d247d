// Command pgxmigrate shows a migration lock on pgx's own API: a session
// lock held across several transactions on one *pgxpool.Conn, so that
// runners started at once apply each migration step exactly once. It is
// the migrate example with no database/sql in between.
//
// Two runners (or -runners n) start together against one schema. Each
// runs its migrations under [pgxlock.WithSessionLock] with
// [advisory.Wait]: the first to get the lock applies every step that
// schema_migrations does not list, each step in a transaction of its own
// on the lock's connection that also records it there; the others wait
// for the lock, for at most -wait, then read schema_migrations again and
// skip what is already applied. A transaction lock would not do: it ends
// with the first step's commit. A runner whose wait runs out gives up with
// an error matching [advisory.ErrLockTimeout], having applied nothing.
//
// The steps run on the session that holds the lock, so the lock cannot
// outlive them: if that session ends (the backend terminated, the server
// restarted), the step in flight rolls back with it and the runner's
// scope returns an error; the next runner gets the lock and carries on
// from the last committed step. Work that runs on other connections while
// the lock is held needs a lease, watched by a heartbeat: see the
// pgxfencing example.
//
//	go -C examples run ./pgxmigrate [-runners 2] [-wait 1m]
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
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

func main() {
	runners := flag.Int("runners", 2, "number of runners started at once")
	wait := flag.Duration("wait", time.Minute, "how long a runner waits for the migration lock")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout, *runners, *wait); err != nil {
		fmt.Fprintln(os.Stderr, "pgxmigrate:", err)
		os.Exit(1)
	}
}

// run opens a pool of one connection per runner, starts the runners at
// once on a fresh schema, and prints what each did and how often each
// step was applied.
func run(ctx context.Context, out io.Writer, runners int, wait time.Duration) error {
	if runners < 1 || runners > math.MaxInt32 {
		return fmt.Errorf("need at least one runner, got %d", runners)
	}
	if wait < 0 {
		return fmt.Errorf("need a wait of zero or more, got %v", wait)
	}
	// One connection per runner, and one for the program's own queries.
	pool, about, closePool, err := pgtest.OpenExamplePool(ctx, out, func(c *pgxpool.Config) { c.MaxConns = int32(runners) + 1 })
	if err != nil {
		return err
	}
	defer closePool()
	fmt.Fprintln(out, about)

	m, err := newMigrator(ctx, pool, wait)
	if err != nil {
		return err
	}
	defer m.drop()

	reports, err := runAll(ctx, m, runners)
	if err != nil {
		return err
	}
	for i, r := range reports {
		fmt.Fprintf(out, "runner %d applied %d steps and skipped %d already applied\n", i+1, r.applied, r.skipped)
	}
	once, err := m.appliedOnce(ctx)
	if err != nil {
		return err
	}
	if once != len(steps) {
		return fmt.Errorf("only %d of %d steps were applied exactly once", once, len(steps))
	}
	fmt.Fprintf(out, "exactly once: all %d steps applied once\n", len(steps))
	return nil
}

// runAll starts the runners together and waits for all of them.
func runAll(ctx context.Context, m *migrator, runners int) ([]report, error) {
	reports := make([]report, runners)
	errs := make([]error, runners)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range runners {
		wg.Go(func() {
			<-start
			reports[i], errs[i] = m.migrate(ctx, i+1)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("runner %d: %w", i+1, errs[i])
			}
		})
	}
	close(start)
	wg.Wait()
	return reports, errors.Join(errs...)
}
