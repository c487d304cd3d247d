package idempotency_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory/idempotency"
)

// A consumer that a queue may hand the same message more than once. The
// credit and its record commit together, so a redelivered message is
// reported Done instead of crediting twice.
func ExampleRun() {
	var db *sql.DB // opened with any PostgreSQL driver
	ctx := context.Background()
	msgID, account, amount := "msg-8f14e45f", 42, 100

	res, err := idempotency.Run(ctx, db, msgID, func(ctx context.Context, tx *sql.Tx) ([]byte, error) {
		if _, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance + $1 WHERE id = $2", amount, account); err != nil {
			return nil, err
		}
		return []byte("credited"), nil
	})
	switch {
	case errors.Is(err, idempotency.ErrInProgress):
		return // another consumer has it; let the queue redeliver later
	case err != nil:
		log.Print(err) // nothing was committed: redeliver
		return
	}
	fmt.Println(res.Outcome, string(res.Value)) // "ran credited", then "done credited"
}

// Records are kept until Purge deletes them; a delivery of a purged
// operation runs again.
func ExamplePurge() {
	var db *sql.DB
	n, err := idempotency.Purge(context.Background(), db, 7*24*time.Hour)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("purged %d records older than a week", n)
}

// A role without the CREATE privilege uses a table that a migration made.
func ExampleSetup() {
	var migrator, service *sql.DB
	ctx := context.Background()
	if err := idempotency.Setup(ctx, migrator, idempotency.Table("billing.processed_ops")); err != nil {
		log.Fatal(err)
	}
	_, _ = idempotency.Run(ctx, service, "op-1", func(ctx context.Context, tx *sql.Tx) ([]byte, error) { return nil, nil },
		idempotency.Table("billing.processed_ops"), idempotency.NoCreate())
}
