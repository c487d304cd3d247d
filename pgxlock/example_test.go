package pgxlock_test

import (
	"context"
	"errors"
	"log"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgxlock"
)

// A nightly job runs at most once at a time across every process: the
// transaction holds the lock, which ends when it commits or rolls back.
// The examples need a server, so they compile and do not run.
func ExampleWithXactLock() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	err = pgxlock.WithXactLock(ctx, pool, advisory.NameKey(7, "nightly"), func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO runs (job, started) VALUES ($1, now())", "nightly")
		return err
	}, advisory.Try())
	switch {
	case errors.Is(err, advisory.ErrNotAcquired):
		log.Print("another process is running it")
	case err != nil:
		log.Fatal(err)
	}
}

// A session lock on a connection of a pool spans several transactions.
// It is released before the connection goes back to the pool: a lock
// left held would go back with it.
func ExampleTryLock() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	conn, err := pool.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Release()
	key := advisory.NameKey(7, "reindex")
	ok, err := pgxlock.TryLock(ctx, conn, key)
	if err != nil {
		log.Fatal(err) // the connection was closed; Release destroys it
	}
	if !ok {
		log.Print("another process is reindexing")
		return
	}
	defer func() {
		if err := pgxlock.Unlock(ctx, conn, key); err != nil {
			log.Print(err)
		}
	}()
	for _, table := range []string{"orders", "invoices"} {
		if _, err := conn.Exec(ctx, "REINDEX TABLE "+table); err != nil {
			log.Print(err)
			return
		}
	}
}

// A transaction lock in a transaction the caller began, on a *pgx.Conn.
func ExampleTryXactLock() {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)

	tx, err := conn.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx) // releases the lock, unless Commit did
	ok, err := pgxlock.TryXactLock(ctx, tx, advisory.PairKey(4, 1001))
	if err != nil || !ok {
		return // busy, or failed: the deferred rollback ends the transaction
	}
	if _, err := tx.Exec(ctx, "UPDATE orders SET state = 'paid' WHERE id = $1", 1001); err != nil {
		return
	}
	if err := tx.Commit(ctx); err != nil { // releases the lock
		log.Print(err)
	}
}
