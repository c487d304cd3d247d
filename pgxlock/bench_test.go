package pgxlock_test

import (
	"context"
	"database/sql"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
	"github.com/pgadvisory/pgadvisory/pgxlock"
)

// benchKeys hands out keys no benchmark call has used before in this
// process.
var benchKeys atomic.Int64

func init() { benchKeys.Store(time.Now().UnixNano() &^ (1 << 62)) }

// benchBatch is how many transaction locks one transaction takes before
// the benchmark commits it, with the timer stopped, to keep the lock table
// small.
const benchBatch = 500

// A benchTx is an open transaction that a variant takes its locks in, and
// begins again after benchBatch calls.
type benchTx struct {
	begin  func() error
	commit func() error
	calls  int
}

// A benchVariant is one way to take a transaction lock, each on a
// connection of its own.
type benchVariant struct {
	name string
	tx   *benchTx
	try  func(ctx context.Context, k advisory.Key) (bool, error)
	// total is the time its calls took in the measured loop.
	total time.Duration
	// allocs is what one call allocates, measured before the loop.
	allocs float64
}

// pgxVariant is pgxlock.TryXactLock in a transaction of a pgx
// connection from pool; raw is the lock function's statement by hand,
// for a floor: pgx's own cost of one statement with an argument.
func pgxVariant(b *testing.B, name string, pool *pgxpool.Pool, raw bool) *benchVariant {
	conn := acquire(b, pool)
	var tx pgx.Tx
	v := &benchVariant{name: name}
	v.tx = &benchTx{
		begin: func() (err error) { tx, err = conn.Begin(context.Background()); return err },
		commit: func() error {
			return tx.Commit(context.Background())
		},
	}
	v.try = func(ctx context.Context, k advisory.Key) (bool, error) { return pgxlock.TryXactLock(ctx, tx, k) }
	if raw {
		v.try = func(ctx context.Context, k advisory.Key) (bool, error) {
			n, _ := k.Int64()
			tag, err := tx.Exec(ctx, "SELECT 1 WHERE pg_catalog.pg_try_advisory_xact_lock($1)", n)
			return tag.RowsAffected() == 1, err
		}
	}
	return v
}

// sqlVariant is advisory.TryXactLock in a transaction of a *sql.Conn of
// db, database/sql over pgx's own pool.
func sqlVariant(b *testing.B, name string, db *sql.DB) *benchVariant {
	conn, err := db.Conn(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	var tx *sql.Tx
	v := &benchVariant{name: name}
	v.tx = &benchTx{
		begin:  func() (err error) { tx, err = conn.BeginTx(context.Background(), nil); return err },
		commit: func() error { return tx.Commit() },
	}
	v.try = func(ctx context.Context, k advisory.Key) (bool, error) { return advisory.TryXactLock(ctx, tx, k) }
	return v
}

// BenchmarkTryXactLock measures one TryXactLock call on a fresh key in an
// open transaction, begin and commit left out, with pgxlock on pgx's own
// API against advisory on database/sql over the same driver
// (stdlib.OpenDBFromPool), and against the statement by hand on pgx. The
// variants run interleaved, one call each in turn on connections of
// their own, so that a change in the machine's load hits them alike; each
// reports its own <variant>-ns/call and <variant>-allocs/call (ns/op is
// their sum). Run it on the CI images with:
//
//	PGADVISORY_TEST_IMAGES=pgadvisory/postgres:15,pgadvisory/postgres:17 \
//		go test -run '^$' -bench TryXactLock -benchtime=5000x -count=3 ./pgxlock/
func BenchmarkTryXactLock(b *testing.B) {
	ctx := context.Background()
	for _, s := range pgtest.Servers(b) {
		b.Run(s.Name, func(b *testing.B) {
			pool := newPool(b, s.DSN, nil)
			sqlPool := newPool(b, s.DSN, nil)
			db := stdlib.OpenDBFromPool(sqlPool)
			b.Cleanup(func() { db.Close() })
			variants := []*benchVariant{
				pgxVariant(b, "pgxlock", pool, false),
				sqlVariant(b, "advisory-stdlib", db),
				pgxVariant(b, "pgx-by-hand", pool, true),
			}
			next := func() advisory.Key { return advisory.Int64Key(benchKeys.Add(1)) }
			call := func(v *benchVariant) {
				if v.tx.calls >= benchBatch {
					b.StopTimer()
					if err := v.tx.commit(); err != nil {
						b.Fatal(err)
					}
					if err := v.tx.begin(); err != nil {
						b.Fatal(err)
					}
					v.tx.calls = 0
					b.StartTimer()
				}
				k := next()
				start := time.Now()
				ok, err := v.try(ctx, k)
				v.total += time.Since(start)
				v.tx.calls++
				if err != nil || !ok {
					b.Fatalf("%s: TryXactLock(%v) = %v, %v", v.name, k, ok, err)
				}
			}
			for _, v := range variants {
				if err := v.tx.begin(); err != nil {
					b.Fatal(err)
				}
				// Warm up: the engine is known and the statement
				// prepared on each connection.
				for range 10 {
					call(v)
				}
				v.allocs = testing.AllocsPerRun(100, func() { call(v) })
				v.total = 0
			}
			b.ResetTimer()
			for range b.N {
				for _, v := range variants {
					call(v)
				}
			}
			b.StopTimer()
			for _, v := range variants {
				if err := v.tx.commit(); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(v.total.Nanoseconds())/float64(b.N), v.name+"-ns/call")
				b.ReportMetric(v.allocs, v.name+"-allocs/call")
			}
		})
	}
}
