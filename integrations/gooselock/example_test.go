package gooselock_test

import (
	"context"
	"database/sql"
	"errors"
	"log"
	"os"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/integrations/gooselock"
)

// Every instance of a service runs its migrations at start-up: the first
// to get the lock applies them, the others wait and then find nothing to
// do. A loss of the lock cancels the migrations' context.
func ExampleNewSessionLocker() {
	db, err := sql.Open("pgx", os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	locker, err := gooselock.NewSessionLocker(gooselock.DefaultKey,
		gooselock.Heartbeat(2*time.Second), // a loss is found within 4 s
		gooselock.Wait(10*time.Minute))     // give up waiting for another instance after 10 min
	if err != nil {
		log.Fatal(err)
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, db, os.DirFS("migrations"),
		goose.WithSessionLocker(locker))
	if err != nil {
		log.Fatal(err)
	}

	ctx, cancel := gooselock.CancelOnLoss(context.Background())
	defer cancel()
	results, err := provider.Up(ctx)
	switch {
	case errors.Is(err, advisory.ErrLockLost):
		log.Fatalf("the migration lock was lost: %v (cause %v)", err, context.Cause(ctx))
	case err != nil:
		log.Fatal(err)
	}
	log.Printf("applied %d migrations", len(results))
}

// A Locker holds the lock on a connection of its own, whose heartbeat
// goes on while a long migration statement runs; CancelOnLoss lets a loss
// stop that statement.
func ExampleNewLocker() {
	db, err := sql.Open("pgx", os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	locker, err := gooselock.NewLocker(advisory.NameKey(1, "billing-migrations"))
	if err != nil {
		log.Fatal(err)
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, db, os.DirFS("migrations"),
		goose.WithLocker(locker))
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := gooselock.CancelOnLoss(context.Background())
	defer cancel()
	if _, err := provider.Up(ctx); err != nil {
		log.Fatal(err)
	}
}
