// Command migrate shows a migration lock: a session lock held as a lease
// across several transactions, so that runners started at once apply each
// migration step exactly once.
//
// Two runners (or -runners n) start together against one schema. Each
// runs its migrations under [advisory.WithSessionLock] with
// [advisory.Heartbeat]: the first to get the lock applies every step that
// schema_migrations does not list, each step in a transaction of its own
// that also records it there; the others wait for the lock, then read
// schema_migrations again and skip what is already applied. A transaction
// lock would not do: it ends with the first step's commit. If the lock is
// lost (the backend terminated, the server restarted), the heartbeat
// cancels the runner's context, the step in flight rolls back, and the
// scope returns an error matching [advisory.ErrLockLost]; the next runner
// carries on from the last committed step.
//
//	go -C examples run ./migrate [-driver pq|pgx] [-runners 2]
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
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/pgadvisory/pgadvisory/pgtest"
)

func main() {
	driver := flag.String("driver", "pq", "database/sql driver: pq or pgx")
	runners := flag.Int("runners", 2, "number of runners started at once")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout, *driver, *runners); err != nil {
		fmt.Fprintln(os.Stderr, "migrate:", err)
		os.Exit(1)
	}
}

// run opens the database, starts the runners at once on a fresh schema,
// and prints what each did and how often each step was applied.
func run(ctx context.Context, out io.Writer, driver string, runners int) error {
	if runners < 1 {
		return fmt.Errorf("need at least one runner, got %d", runners)
	}
	db, about, closeDB, err := pgtest.OpenExample(ctx, driver, out)
	if err != nil {
		return err
	}
	defer closeDB()
	fmt.Fprintln(out, about)

	m, err := newMigrator(ctx, db)
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
