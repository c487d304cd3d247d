// Command pgxfencing shows why a lease carries a fencing token, and how a
// store uses it to refuse a holder whose lease was lost, on pgx's own API:
// the fencing example, on a *pgxpool.Pool.
//
// Two schedulers take the lease on one key in turn, with
// [pgxlock.Acquire] and [advisory.Fencing]. The first one's session is
// ended behind its back (as a failover or a network cut would end it), so
// another scheduler takes the lease and writes. The first one does not
// know yet, and writes too: the store refuses its write, because its
// token is older than the last one the store accepted. Its heartbeat then
// tells it the lease is lost.
//
//	go -C examples run ./pgxfencing
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
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
	"github.com/pgadvisory/pgadvisory/pgxlock"
)

// schedulerKey is the one lock the schedulers compete for.
var schedulerKey = advisory.NameKey(1, "pgx-nightly-scheduler")

func main() {
	flag.Parse()
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "pgxfencing:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer) error {
	// A lease holds a connection; the store's writes take another.
	pool, about, closePool, err := pgtest.OpenExamplePool(ctx, out, func(c *pgxpool.Config) { c.MaxConns = 4 })
	if err != nil {
		return err
	}
	defer closePool()
	fmt.Fprintln(out, about)
	if err := createStore(ctx, pool); err != nil {
		return err
	}
	defer dropStore(pool)

	// The first scheduler takes the lease.
	first, err := pgxlock.Acquire(ctx, pool, schedulerKey, advisory.Fencing(), advisory.Heartbeat(time.Second))
	if err != nil {
		return err
	}
	defer first.Release(context.WithoutCancel(ctx))
	fmt.Fprintf(out, "first scheduler holds the lease with token %d\n", first.Token())

	// Its session ends behind its back; the second scheduler waits for
	// the lock and gets it, with a newer token, and writes.
	if err := endHolder(ctx, pool); err != nil {
		return err
	}
	second, err := pgxlock.Acquire(ctx, pool, schedulerKey, advisory.Fencing())
	if err != nil {
		return err
	}
	defer second.Release(context.WithoutCancel(ctx))
	fmt.Fprintf(out, "second scheduler holds the lease with token %d\n", second.Token())
	if err := write(ctx, pool, second.Token(), "run by the second scheduler"); err != nil {
		return err
	}
	fmt.Fprintln(out, "second scheduler's write: accepted")

	// The first one has not noticed yet (its next heartbeat will tell it),
	// and writes with its old token. The store refuses it.
	err = write(ctx, pool, first.Token(), "run by the first scheduler")
	fmt.Fprintf(out, "first scheduler's write: %v\n", err)
	if !errors.Is(err, errStaleToken) {
		return fmt.Errorf("the stale write was not refused: %v", err)
	}
	<-first.Done()
	fmt.Fprintf(out, "first scheduler learns it lost the lease: %v\n", first.Err())
	return nil
}

// errStaleToken is what the store answers a write whose token is older
// than the last one it accepted.
var errStaleToken = errors.New("refused: a newer lease holder has written since")

// write records note in the store, unless a write with a newer token came
// first: the check and the write are one statement.
func write(ctx context.Context, pool *pgxpool.Pool, token int64, note string) error {
	tag, err := pool.Exec(ctx,
		`UPDATE pgxfencing_store SET note = $1, token = $2 WHERE id = 1 AND token < $2`, note, token)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return errStaleToken
	}
	return nil
}

// endHolder ends the session that holds the scheduler's lock, as a
// failover would.
func endHolder(ctx context.Context, pool *pgxpool.Pool) error {
	k1, k2, _ := schedulerKey.Pair()
	_, err := pool.Exec(ctx, `SELECT pg_catalog.pg_terminate_backend(pid) FROM pg_catalog.pg_locks
		WHERE locktype = 'advisory' AND classid = $1::int8::oid AND objid = $2::int8::oid AND objsubid = 2 AND granted`,
		int64(uint32(k1)), int64(uint32(k2)))
	return err
}

func createStore(ctx context.Context, pool *pgxpool.Pool) error {
	_, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS pgxfencing_store (id int PRIMARY KEY, token bigint NOT NULL, note text);
		INSERT INTO pgxfencing_store VALUES (1, 0, '') ON CONFLICT (id) DO UPDATE SET token = 0, note = ''`)
	return err
}

func dropStore(pool *pgxpool.Pool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = pool.Exec(ctx, `DROP TABLE IF EXISTS pgxfencing_store`)
}
