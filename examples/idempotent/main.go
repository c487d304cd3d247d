// Command idempotent shows a consumer that applies each message once,
// however often the queue delivers it.
//
// A queue delivers each of 50 deposit messages 5 times, in a random
// order, to 8 consumers on one connection pool. Each consumer runs the
// deposit under [idempotency.Run] keyed by the message ID: the first
// delivery credits the account and records the message in the same
// transaction; the others find it done, or in progress and try again a
// moment later. At the end the program checks in the database that every
// deposit was applied exactly once.
//
//	go -C examples run ./idempotent [-driver pq|pgx|pgxpool] [-messages 50] [-copies 5] [-consumers 8]
//
// With -driver pgxpool it runs on a *pgxpool.Pool, as a program on pgx's
// own API does.
//
// It uses the database in DATABASE_URL when that is set, creating and
// then dropping tables of its own. Otherwise it starts a disposable
// PostgreSQL (in Docker, or from local initdb and postgres binaries) and
// removes it when it ends.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory/idempotency"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

func main() {
	driver := flag.String("driver", "pq", "pq or pgx (database/sql drivers), or pgxpool (a pgx pool through stdlib.OpenDBFromPool)")
	messages := flag.Int("messages", 50, "number of distinct messages")
	copies := flag.Int("copies", 5, "deliveries of each message")
	consumers := flag.Int("consumers", 8, "number of consumers")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout, *driver, *messages, *copies, *consumers); err != nil {
		fmt.Fprintln(os.Stderr, "idempotent:", err)
		os.Exit(1)
	}
}

// The example's tables; run drops them when it ends.
const (
	accountsTable = "idempotent_example_accounts"
	recordsTable  = "idempotent_example_processed"
)

// message is a deposit of 1 to an account.
type message struct {
	id      string
	account int
}

// tally counts what the consumers saw.
type tally struct{ ran, done, busy atomic.Int64 }

// run opens the database, delivers the messages, and checks the balances.
func run(ctx context.Context, out io.Writer, driver string, messages, copies, consumers int) error {
	if messages < 1 || copies < 1 || consumers < 1 {
		return fmt.Errorf("need at least one message, copy and consumer, got %d, %d and %d", messages, copies, consumers)
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
	db.SetMaxOpenConns(consumers)

	if _, err := db.ExecContext(ctx, "CREATE TABLE "+accountsTable+" (id int PRIMARY KEY, balance int NOT NULL DEFAULT 0)"); err != nil {
		return err
	}
	defer db.ExecContext(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS "+accountsTable+", "+recordsTable)
	if _, err := db.ExecContext(ctx, "INSERT INTO "+accountsTable+" (id) SELECT generate_series(1, 10)"); err != nil {
		return err
	}

	// The queue: every message copies times, shuffled.
	queue := make(chan message, messages*copies)
	var all []message
	for i := range messages {
		m := message{id: fmt.Sprintf("deposit-%03d", i), account: i%10 + 1}
		for range copies {
			all = append(all, m)
		}
	}
	rand.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	for _, m := range all {
		queue <- m
	}
	close(queue)

	var t tally
	errs := make([]error, consumers)
	var wg sync.WaitGroup
	for c := range consumers {
		wg.Go(func() {
			for m := range queue {
				if err := consume(ctx, db, m, &t); err != nil {
					errs[c] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Fprintf(out, "%d deliveries: %d applied, %d found done, %d found in progress and retried\n",
		len(all), t.ran.Load(), t.done.Load(), t.busy.Load())

	var total int
	if err := db.QueryRowContext(ctx, "SELECT sum(balance) FROM "+accountsTable).Scan(&total); err != nil {
		return err
	}
	if total != messages {
		return fmt.Errorf("the balances add up to %d after %d distinct deposits", total, messages)
	}
	fmt.Fprintf(out, "exactly once: the balances add up to %d, one per message\n", total)
	return nil
}

// consume handles one delivery, trying again while another consumer has
// the same message in progress, as a queue would redeliver it.
func consume(ctx context.Context, db *sql.DB, m message, t *tally) error {
	for {
		res, err := idempotency.Run(ctx, db, m.id, func(ctx context.Context, tx *sql.Tx) ([]byte, error) {
			var balance int
			err := tx.QueryRowContext(ctx, "UPDATE "+accountsTable+" SET balance = balance + 1 WHERE id = $1 RETURNING balance", m.account).Scan(&balance)
			return fmt.Appendf(nil, "account %d balance %d", m.account, balance), err
		}, idempotency.Table(recordsTable))
		switch {
		case errors.Is(err, idempotency.ErrInProgress):
			t.busy.Add(1)
			time.Sleep(5 * time.Millisecond)
			continue
		case err != nil:
			return fmt.Errorf("message %s: %w", m.id, err)
		case res.Outcome == idempotency.Ran:
			t.ran.Add(1)
		default:
			t.done.Add(1)
		}
		return nil
	}
}
