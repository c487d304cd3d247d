package advisory_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/benchorder"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
	_ "github.com/lib/pq"              // the "postgres" driver

	"github.com/pgadvisory/pgadvisory/pgtest"
)

// What the lock benchmarks share. The benchmarks are in the files of
// their APIs: BenchmarkTryLock in session_bench_test.go,
// BenchmarkTryXactLock in xact_bench_test.go, BenchmarkWithXactLock in
// xactscope_bench_test.go, each with its Interleaved form, and
// BenchmarkInterleavedForm, which weighs every lock call's two statement
// forms, in entrypoints_bench_test.go.
//
// They set the library beside every form of the same call written by
// hand (see [handForm]): through ExecContext or QueryRowContext, as
// "SELECT 1 WHERE pg_try_advisory_lock(k)" or "SELECT
// pg_try_advisory_lock(k)", with the key in the text or as $1. On lib/pq a
// parameter costs a second round trip (Parse/Describe/Sync, then
// Bind/Execute/Sync) unless the DSN sets binary_parameters=yes; pgx
// prepares a statement with parameters once per connection, and one whose
// key is in the text once per text, through QueryRowContext, when
// ExecContext without arguments takes the simple protocol.
//
// Each runs with a fresh key on every call, which makes per-text statement
// caching visible, and with one fixed key. The baseline is "SELECT 1"
// through ExecContext. Besides ns/op and allocs/op, each reports
// roundtrips/op, counted by a pgtest.Proxy in the steady state: after more
// calls than pgx's statement cache holds. The interleaved forms run every
// variant once per op, in an order shuffled anew for each op from a seed
// (PGADVISORY_BENCH_SEED), and report each library call over the fastest
// form by hand ("ours-freshkey/best").
//
// ci/bench.sh runs them and docs/benchmarks.md gives the results. Run them
// on the CI images with:
//
//	PGADVISORY_TEST_IMAGES=pgadvisory/postgres:15,pgadvisory/postgres:17 \
//		go test -run '^$' -bench . -benchtime=2000x -count=3 ./advisory/

// A benchDriver is a database/sql driver and settings to compare.
type benchDriver struct {
	name       string // in the benchmark name
	sql        string // the database/sql driver name
	params     string // added to the DSN's query
	paramsOnly bool   // only the forms by hand with parameters are worth running
}

// benchDrivers are the drivers the lock benchmarks run on. lib/pq with
// binary_parameters=yes changes only how parameters travel, so only the
// forms by hand with parameters run on it, and in the interleaved
// benchmarks the baseline too.
var benchDrivers = []benchDriver{
	{name: pgtest.DriverPQ, sql: "postgres"},
	{name: pgtest.DriverPQ + "-binary", sql: "postgres", params: "binary_parameters=yes", paramsOnly: true},
	{name: pgtest.DriverPGX, sql: "pgx"},
}

// runs reports whether variant v is worth running on d.
func (d benchDriver) runs(v benchVariant) bool {
	return !d.paramsOnly || v.hand && strings.HasSuffix(v.name, "-param")
}

// open opens a *sql.DB of d on dsn with one connection.
func (d benchDriver) open(tb testing.TB, dsn string) *sql.DB {
	tb.Helper()
	if d.params != "" {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		dsn += sep + d.params
	}
	db, err := sql.Open(d.sql, dsn)
	if err != nil {
		tb.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	tb.Cleanup(func() { db.Close() })
	return db
}

// benchConn returns a *sql.Conn of db that has been used once, so that the
// session exists. It is closed at tb's cleanup.
func benchConn(tb testing.TB, db *sql.DB) *sql.Conn {
	tb.Helper()
	conn, err := db.Conn(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	if _, err := conn.ExecContext(context.Background(), "SELECT 1"); err != nil {
		tb.Fatal(err)
	}
	return conn
}

// freshKeys hands out keys that no benchmark call has used before in this
// process, so that no statement text repeats.
var freshKeys atomic.Int64

func init() { freshKeys.Store(time.Now().UnixNano() &^ (1 << 62)) }

// fixedKey is the key of the fixed-key variants.
const fixedKey = 42

// A benchHandle is where a measured call runs: the session's conn, and for
// transaction locks the open transaction on it.
type benchHandle struct {
	conn  *sql.Conn
	tx    *sql.Tx
	xact  bool
	calls int
}

// newBenchHandle returns a handle on a new connection of db. A transaction
// still open when tb ends is rolled back before the connection closes: a
// *sql.Conn cannot close while a transaction on it is open.
func newBenchHandle(tb testing.TB, db *sql.DB, xact bool) *benchHandle {
	tb.Helper()
	h := &benchHandle{conn: benchConn(tb, db), xact: xact}
	tb.Cleanup(func() {
		if h.tx != nil {
			_ = h.tx.Rollback()
			h.tx = nil
		}
	})
	return h
}

// xactBatch is how many transaction locks one transaction takes before the
// benchmark commits it, with the timer stopped, to keep the lock table
// small.
const xactBatch = 500

// start begins the transaction of a transaction-lock handle.
func (h *benchHandle) start(tb testing.TB) {
	tb.Helper()
	if !h.xact {
		return
	}
	tx, err := h.conn.BeginTx(context.Background(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	h.tx = tx
	h.calls = 0
}

// finish commits the transaction of a transaction-lock handle, releasing
// its locks.
func (h *benchHandle) finish(tb testing.TB) {
	tb.Helper()
	if h.tx == nil {
		return
	}
	if err := h.tx.Commit(); err != nil {
		tb.Fatal(err)
	}
	h.tx = nil
}

// due reports whether the transaction has taken xactBatch locks and should
// be committed before the next call.
func (h *benchHandle) due() bool { return h.xact && h.calls >= xactBatch }

// A benchOp is one measured call with key k.
type benchOp func(ctx context.Context, h *benchHandle, k int64) error

// A benchVariant is one way to make the measured call.
type benchVariant struct {
	name  string // "baseline", "ours", "exec-where-inline", ...
	keyed bool   // runs as -freshkey and -fixedkey
	hand  bool   // SQL by hand, which the library's calls of its group are set against
	group string // what the variant does ("try", "lock"), or "" for the baseline
	op    benchOp
}

// handVariants returns a variant of group for every form by hand, each
// running op in that form.
func handVariants(group, prefix string, op func(f handForm) benchOp) []benchVariant {
	var vs []benchVariant
	for _, f := range handForms {
		vs = append(vs, benchVariant{name: prefix + f.name, keyed: true, hand: true, group: group, op: op(f)})
	}
	return vs
}

// benchExecer and benchQueryer are what *sql.Conn and *sql.Tx have in
// common.
type (
	benchExecer interface {
		ExecContext(context.Context, string, ...any) (sql.Result, error)
	}
	benchQueryer interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}
)

var (
	_ benchExecer  = (*sql.Conn)(nil)
	_ benchExecer  = (*sql.Tx)(nil)
	_ benchQueryer = (*sql.Conn)(nil)
	_ benchQueryer = (*sql.Tx)(nil)
)

// execSelect1 is the baseline: one statement, no parameters, no answer.
func execSelect1(ctx context.Context, e benchExecer) error {
	_, err := e.ExecContext(ctx, "SELECT 1")
	return err
}

// queryBool runs a one-row boolean query through QueryRowContext and
// requires it to be true.
func queryBool(ctx context.Context, q benchQueryer, query string, args ...any) error {
	var ok bool
	if err := q.QueryRowContext(ctx, query, args...).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s %v: false", query, args)
	}
	return nil
}

// execOne sends a statement through ExecContext and requires it to
// affect one row, as the library reads a try's answer.
func execOne(ctx context.Context, e benchExecer, query string, args ...any) error {
	res, err := e.ExecContext(ctx, query, args...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("%s %v: %d rows, %v", query, args, n, err)
	}
	return nil
}

// benchLocks runs every variant on every server and driver, as
// BenchmarkX/pg15/pq/ours-freshkey and so on.
func benchLocks(b *testing.B, xact bool, variants []benchVariant) {
	for _, s := range pgtest.Servers(b) {
		b.Run(s.Name, func(b *testing.B) {
			proxy := s.Proxy(b)
			for _, d := range benchDrivers {
				b.Run(d.name, func(b *testing.B) {
					for _, v := range variants {
						if !d.runs(v) {
							continue
						}
						keys := []string{""}
						if v.keyed {
							keys = []string{"-freshkey", "-fixedkey"}
						}
						for _, kind := range keys {
							fresh := kind == "-freshkey"
							b.Run(v.name+kind, func(b *testing.B) {
								rt := roundTrips(b, proxy, d, xact, fresh, v.op)
								benchOne(b, s.DSN, d, xact, fresh, v.op)
								b.ReportMetric(rt, "roundtrips/op")
							})
						}
					}
				})
			}
		})
	}
}

// nextKey returns the key of the next call.
func nextKey(fresh bool) int64 {
	if fresh {
		return freshKeys.Add(1)
	}
	return fixedKey
}

// benchOne times b.N calls of op on a new connection, after one untimed
// call that opens the session and lets pgx prepare what it will reuse.
func benchOne(b *testing.B, dsn string, d benchDriver, xact, fresh bool, op benchOp) {
	ctx := context.Background()
	h := newBenchHandle(b, d.open(b, dsn), xact)
	h.start(b)
	if err := op(ctx, h, nextKey(fresh)); err != nil {
		b.Fatal(err)
	}
	h.calls++
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if h.due() {
			b.StopTimer()
			h.finish(b)
			h.start(b)
			b.StartTimer()
		}
		if err := op(ctx, h, nextKey(fresh)); err != nil {
			b.Fatal(err)
		}
		h.calls++
	}
	b.StopTimer()
	h.finish(b)
}

// roundTripWarmup is how many fresh-key calls run before round trips are
// counted: more than pgx's statement cache holds (512), so that the count
// is the steady state of a long-lived connection.
const roundTripWarmup = 600

// roundTripCalls is how many calls the count is averaged over.
const roundTripCalls = 20

// roundTripCache keeps each benchmark's count: it is measured once per
// process, not on every run of the benchmark function.
var roundTripCache sync.Map // benchmark name -> float64

// roundTrips counts the round trips one call of op costs in the steady
// state, through proxy, on a connection of its own.
func roundTrips(b *testing.B, proxy *pgtest.Proxy, d benchDriver, xact, fresh bool, op benchOp) float64 {
	if v, ok := roundTripCache.Load(b.Name()); ok {
		return v.(float64)
	}
	ctx := context.Background()
	h := newBenchHandle(b, d.open(b, proxy.DSN()), xact)
	h.start(b)
	warmup := 2
	if fresh {
		warmup = roundTripWarmup
	}
	for range warmup {
		if h.due() {
			h.finish(b)
			h.start(b)
		}
		if err := op(ctx, h, nextKey(fresh)); err != nil {
			b.Fatal(err)
		}
		h.calls++
	}
	// A new transaction, and one call in it: pgx deallocates evicted
	// statements before the next statement, which may be the BEGIN.
	h.finish(b)
	h.start(b)
	if err := op(ctx, h, nextKey(fresh)); err != nil {
		b.Fatal(err)
	}
	proxy.Reset()
	for range roundTripCalls {
		if err := op(ctx, h, nextKey(fresh)); err != nil {
			b.Fatal(err)
		}
	}
	n := float64(proxy.Flights()) / roundTripCalls
	h.finish(b)
	roundTripCache.Store(b.Name(), n)
	return n
}

// An interleavedCall is one variant of an interleaved benchmark, on its
// own connection.
type interleavedCall struct {
	name  string
	group string // the variant's group and key kind, "try-freshkey"
	hand  bool
	fresh bool
	fixed int64 // the key when not fresh
	op    benchOp
	h     *benchHandle
	total time.Duration // time spent in op
}

// key returns the key of the call's next op.
func (c *interleavedCall) key() int64 {
	if c.fresh {
		return freshKeys.Add(1)
	}
	return c.fixed
}

// benchInterleaved runs, per server and driver, every variant once per op,
// in an order shuffled anew for every op ([benchorder.New]).
func benchInterleaved(b *testing.B, xact bool, variants []benchVariant) {
	ctx := context.Background()
	for _, s := range pgtest.Servers(b) {
		b.Run(s.Name, func(b *testing.B) {
			for _, d := range benchDrivers {
				b.Run(d.name, func(b *testing.B) {
					var es []*interleavedCall
					for _, v := range variants {
						if !d.runs(v) && v.name != "baseline" {
							continue
						}
						kinds := []string{""}
						if v.keyed {
							kinds = []string{"-freshkey", "-fixedkey"}
						}
						for _, kind := range kinds {
							// Each fixed-key variant has a key of its own: the
							// transactions of two variants overlap.
							e := &interleavedCall{name: v.name + kind, hand: v.hand, fresh: kind == "-freshkey", fixed: fixedKey + int64(len(es)), op: v.op}
							if v.group != "" {
								e.group = v.group + kind
							}
							e.h = newBenchHandle(b, d.open(b, s.DSN), xact)
							e.h.start(b)
							if err := e.op(ctx, e.h, e.key()); err != nil {
								b.Fatal(err)
							}
							e.h.calls++
							es = append(es, e)
						}
					}
					o := benchorder.New(b, len(es))
					b.ReportAllocs()
					b.ResetTimer()
					for range b.N {
						for _, i := range o.Next() {
							e := es[i]
							if e.h.due() {
								b.StopTimer()
								e.h.finish(b)
								e.h.start(b)
								b.StartTimer()
							}
							k := e.key()
							start := time.Now()
							if err := e.op(ctx, e.h, k); err != nil {
								b.Fatal(err)
							}
							e.total += time.Since(start)
							e.h.calls++
						}
					}
					b.StopTimer()
					names, groups, hand, times := make([]string, len(es)), make([]string, len(es)), make([]bool, len(es)), make([]float64, len(es))
					for i, e := range es {
						e.h.finish(b)
						names[i], groups[i], hand[i] = e.name, e.group, e.hand
						times[i] = float64(e.total.Nanoseconds()) / float64(b.N)
						b.ReportMetric(times[i], e.name+"-ns/call")
					}
					reportBest(b, names, groups, hand, times)
				})
			}
		})
	}
}
