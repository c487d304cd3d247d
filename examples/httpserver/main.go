// Command httpserver shows the net/http middleware coordinating two
// requests for the same order.
//
// It serves POST /orders/{id}, which records a payment for the order,
// behind middleware.XactLock with the key PairKey(1, id): each request runs
// in a transaction that holds the order's lock, and the transaction commits
// before the response is written. The program then plays a client against
// itself: the first request for order 42 pauses inside its handler, holding
// the lock, while a second request for order 42 is refused with 409
// Conflict and a request for order 43 is served. Then the first completes
// with 200, order 42 is free again, and a malformed id gets 400. For every
// 200, the handler stays running after its response has gone out until the
// client has read the order's payments from another connection: the
// payment is already there, which proves that the middleware committed
// before the response, not after the handler returned. It prints each
// response, checks the payments in the database, and exits: with status 1
// if anything differed from what the middleware promises.
//
//	go run ./examples/httpserver [-driver pq|pgx]
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
		fmt.Fprintf(os.Stderr, "httpserver: %v\n", err)
		return 1
	}
	defer closeDB()
	fmt.Printf("driver %s, %s\n", *driver, about)

	if err := run(ctx, db, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "httpserver: %v\n", err)
		return 1
	}
	return 0
}
