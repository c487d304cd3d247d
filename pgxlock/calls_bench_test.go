package pgxlock_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/benchorder"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
	"github.com/pgadvisory/pgadvisory/pgxlock"
)

// callOps is how many calls each variant makes in a repeat of
// BenchmarkCallsVsHand and BenchmarkXactScopeVsHand.
const callOps = 1000

// The forms by hand a lock call is set against, all through pgx on a
// connection of their own:
//
//   - hand-same: the very statement text pgxlock sends (read from
//     pg_prepared_statements on pgxlock's connection, the standby guard
//     included), through Exec, its answer read from the rows affected, as
//     pgxlock reads it: what pgxlock adds to pgx itself;
//   - hand-where: "SELECT 1 WHERE pg_catalog.f($1)" through Exec, the
//     guard left out;
//   - hand-select: "SELECT pg_catalog.f($1)" through QueryRow and Scan,
//     the way a pgx user is likely to write it.
const (
	handSame   = "hand-same"
	handWhere  = "hand-where"
	handSelect = "hand-select"
)

// A callVariant is one way to make a measured call, on a connection of
// its own.
type callVariant struct {
	name string
	hand bool
	// call makes one call with key k; it is timed.
	call func(ctx context.Context, k int64) error
	// renew, when set, runs untimed after every xactBatchCalls calls: it
	// commits the variant's transaction and begins another, to keep the
	// lock table small.
	renew func() error
	calls int
	// ns is the median time of a call in each repeat, mean its mean
	// time; allocs what one call allocates, measured before the repeats.
	ns, mean []float64
	allocs   float64
}

// xactBatchCalls is how many transaction locks a variant's transaction
// takes before renew commits it.
const xactBatchCalls = 500

// preparedText returns the one statement prepared on q's session whose
// text calls pg_catalog.fn, such as "pg_try_advisory_lock": the text
// pgxlock sent.
func preparedText(b *testing.B, q querier, fn string) string {
	b.Helper()
	var texts []string
	err := q.QueryRow(context.Background(),
		"SELECT pg_catalog.array_agg(statement) FROM pg_catalog.pg_prepared_statements WHERE pg_catalog.strpos(statement, $1) > 0",
		"pg_catalog."+fn+"(").Scan(&texts)
	if err != nil {
		b.Fatal(err)
	}
	if len(texts) != 1 {
		b.Fatalf("statements prepared that call %s: %q; want one", fn, texts)
	}
	return texts[0]
}

// pgxExecer is what *pgxpool.Conn and pgx.Tx have in common that the
// forms by hand use.
type pgxExecer interface {
	querier
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// execOne sends text with k through Exec and requires it to affect one
// row: the answer of "SELECT 1 WHERE f($1)", pgxlock's form.
func execOne(ctx context.Context, q pgxExecer, text string, k int64) error {
	tag, err := q.Exec(ctx, text, k)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("%s with %d: %d rows", text, k, tag.RowsAffected())
	}
	return nil
}

// selectTrue sends text with k through QueryRow and requires its boolean
// answer to be true.
func selectTrue(ctx context.Context, q pgxExecer, text string, k int64) error {
	var ok bool
	if err := q.QueryRow(ctx, text, k).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s with %d: false", text, k)
	}
	return nil
}

// handForm returns how form (handSame, handWhere or handSelect) sends
// fn, and in what text; same is the text pgxlock sends.
func handForm(form, fn, same string) (send func(ctx context.Context, q pgxExecer, text string, k int64) error, text string) {
	switch form {
	case handWhere:
		return execOne, "SELECT 1 WHERE pg_catalog." + fn + "($1)"
	case handSelect:
		return selectTrue, "SELECT pg_catalog." + fn + "($1)"
	}
	return execOne, same
}

// handCall returns a call by hand in form: one statement per function of
// fns in turn, each with the key, on q(). same are the texts pgxlock
// sends, in the order of fns.
func handCall(form string, q func() pgxExecer, fns, same []string) func(ctx context.Context, k int64) error {
	sends := make([]func(ctx context.Context, q pgxExecer, text string, k int64) error, len(fns))
	texts := make([]string, len(fns))
	for i, fn := range fns {
		sends[i], texts[i] = handForm(form, fn, same[i])
	}
	return func(ctx context.Context, k int64) error {
		for i, text := range texts {
			if err := sends[i](ctx, q(), text, k); err != nil {
				return err
			}
		}
		return nil
	}
}

// handForms are the forms by hand, in the order the benchmarks list them.
var handForms = []string{handSame, handWhere, handSelect}

// An xactConn is a connection of its own with a transaction open on it,
// rolled back at b's cleanup.
type xactConn struct {
	conn *pgxpool.Conn
	tx   pgx.Tx
}

// newXactConn acquires a connection of pool and begins a transaction on
// it.
func newXactConn(b *testing.B, pool *pgxpool.Pool) *xactConn {
	x := &xactConn{conn: acquire(b, pool)}
	if err := x.begin(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = x.tx.Rollback(context.Background()) }) // before the Release acquire registered
	return x
}

func (x *xactConn) begin() (err error) {
	x.tx, err = x.conn.Begin(context.Background())
	return err
}

// renew commits the transaction, releasing its locks, and begins another.
func (x *xactConn) renew() error {
	if err := x.tx.Commit(context.Background()); err != nil {
		return err
	}
	return x.begin()
}

// runCalls runs the variants' calls interleaved: in each of benchRepeats
// repeats, callOps rounds, each a call of every variant with a fresh key
// in an order shuffled anew. A repeat's figure of a variant is the median
// of its calls' times, which a burst of the shared machine's load moves
// less than the mean; the mean is kept too. Each variant first makes a few calls to warm
// its connection up (the engine known, its statements prepared), then its
// allocations are counted.
func runCalls(b *testing.B, vs []*callVariant) {
	ctx := context.Background()
	one := func(v *callVariant) time.Duration {
		k := benchKeys.Add(1)
		start := time.Now()
		err := v.call(ctx, k)
		d := time.Since(start)
		if err != nil {
			b.Fatalf("%s: %v", v.name, err)
		}
		v.calls++
		if v.renew != nil && v.calls%xactBatchCalls == 0 {
			if err := v.renew(); err != nil {
				b.Fatalf("%s: %v", v.name, err)
			}
		}
		return d
	}
	for _, v := range vs {
		for range 20 {
			one(v)
		}
		v.allocs = testing.AllocsPerRun(100, func() {
			if err := v.call(ctx, benchKeys.Add(1)); err != nil {
				b.Fatalf("%s: %v", v.name, err)
			}
		})
		one(v)
	}
	order := benchorder.New(b, len(vs))
	ds := make([][]time.Duration, len(vs))
	for i := range ds {
		ds[i] = make([]time.Duration, callOps)
	}
	for range benchRepeats {
		for op := range callOps {
			for _, i := range order.Next() {
				ds[i][op] = one(vs[i])
			}
		}
		for i, v := range vs {
			var sum time.Duration
			for _, d := range ds[i] {
				sum += d
			}
			v.ns = append(v.ns, float64(quantile(ds[i], 0.5).Nanoseconds()))
			v.mean = append(v.mean, float64(sum.Nanoseconds())/callOps)
		}
	}
}

// reportCalls reports each variant's median µs per call and allocations,
// and pgxlock's variants' median ratio to hand-same and to the fastest
// form by hand of each repeat, and logs them as a table with their ranges,
// the ratio of the means beside, and the load average.
func reportCalls(b *testing.B, what string, vs []*callVariant) {
	var same *callVariant
	for _, v := range vs {
		if strings.HasSuffix(v.name, handSame) {
			same = v
		}
	}
	best := make([]float64, benchRepeats)
	for i := range best {
		for _, v := range vs {
			if v.hand && (best[i] == 0 || v.ns[i] < best[i]) {
				best[i] = v.ns[i]
			}
		}
	}
	var rows [][]string
	for _, v := range vs {
		us := make([]float64, len(v.ns))
		for i, ns := range v.ns {
			us[i] = ns / 1e3
		}
		toSame, toBest := spreadOf(ratios(v.ns, same.ns)), spreadOf(ratios(v.ns, best))
		meanToSame := spreadOf(ratios(v.mean, same.mean))
		rows = append(rows, []string{v.name, spreadOf(us).format("%.1f") + " µs", fmt.Sprintf("%.0f", v.allocs),
			fmt.Sprintf("%+.0f", v.allocs-same.allocs), toSame.format("%.3f"), toBest.format("%.3f"), meanToSame.format("%.3f")})
		b.ReportMetric(median(us), v.name+"-µs/call")
		b.ReportMetric(v.allocs, v.name+"-allocs/call")
		if !v.hand {
			b.ReportMetric(toSame.med, v.name+"/"+same.name)
			b.ReportMetric(toBest.med, v.name+"/best")
			b.ReportMetric(v.allocs-same.allocs, v.name+"-allocs-over-"+same.name)
		}
	}
	b.Logf("%s: %d repeats of %d calls each, interleaved; each repeat's median call, then the median (range) over the repeats; load average %s:\n%s",
		what, benchRepeats, callOps, loadAvg(),
		mdTable([]string{"variant", "per call (p50)", "allocs", "allocs − " + same.name, "÷ " + same.name, "÷ fastest by hand", "÷ " + same.name + ", means"}, rows))
}

// BenchmarkCallsVsHand measures pgxlock's lock calls against the same
// statements sent by hand through pgx (see [handSame]), on fresh keys:
//
//   - TryLockUnlock: pgxlock.TryLock then pgxlock.Unlock on a
//     *pgxpool.Conn, two round trips;
//   - TryXactLock: pgxlock.TryXactLock in an open pgx.Tx (committed and
//     begun again every xactBatchCalls calls, untimed).
//
// Every variant has a connection of its own. They run interleaved, one
// call each per round in an order shuffled anew from a logged seed
// (PGADVISORY_BENCH_SEED), benchRepeats repeats of callOps rounds. A
// repeat's figure of a variant is its median call; it reports the median
// of those over the repeats, pgxlock's ratios to the forms by hand and its
// allocations over hand-same's, and logs a table with the ranges, the
// ratio of the means and the load average. Run it, and the other
// benchmarks against pgx by hand, on the CI images with:
//
//	PGADVISORY_TEST_IMAGES=pgadvisory/postgres:15,pgadvisory/postgres:17 \
//		go test -run '^$' -bench VsHand -benchtime=1x ./pgxlock/
func BenchmarkCallsVsHand(b *testing.B) {
	ctx := context.Background()
	for _, s := range pgtest.Servers(b) {
		b.Run(s.Name, func(b *testing.B) {
			pool := newPool(b, s.DSN, func(c *pgxpool.Config) { c.MaxConns = 8 })
			b.Run("TryLockUnlock", func(b *testing.B) {
				for range b.N {
					libConn := acquire(b, pool)
					lib := &callVariant{name: "pgxlock", call: func(ctx context.Context, k int64) error {
						key := advisory.Int64Key(k)
						ok, err := pgxlock.TryLock(ctx, libConn, key)
						if err != nil || !ok {
							return fmt.Errorf("TryLock = %v, %v", ok, err)
						}
						return pgxlock.Unlock(ctx, libConn, key)
					}}
					if err := lib.call(ctx, benchKeys.Add(1)); err != nil {
						b.Fatal(err)
					}
					fns := []string{"pg_try_advisory_lock", "pg_advisory_unlock"}
					same := []string{preparedText(b, libConn, fns[0]), preparedText(b, libConn, fns[1])}
					b.Logf("pgxlock's statements: %q", same)
					vs := []*callVariant{lib}
					for _, form := range handForms {
						conn := acquire(b, pool)
						vs = append(vs, &callVariant{name: form, hand: true,
							call: handCall(form, func() pgxExecer { return conn }, fns, same)})
					}
					runCalls(b, vs)
					reportCalls(b, s.Name+" TryLock+Unlock on a *pgxpool.Conn", vs)
				}
			})
			b.Run("TryXactLock", func(b *testing.B) {
				for range b.N {
					x := newXactConn(b, pool)
					lib := &callVariant{name: "pgxlock", renew: x.renew, call: func(ctx context.Context, k int64) error {
						ok, err := pgxlock.TryXactLock(ctx, x.tx, advisory.Int64Key(k))
						if err != nil || !ok {
							return fmt.Errorf("TryXactLock = %v, %v", ok, err)
						}
						return nil
					}}
					if err := lib.call(ctx, benchKeys.Add(1)); err != nil {
						b.Fatal(err)
					}
					fns := []string{"pg_try_advisory_xact_lock"}
					same := []string{preparedText(b, x.tx, fns[0])}
					b.Logf("pgxlock's statement: %q", same)
					vs := []*callVariant{lib}
					for _, form := range handForms {
						x := newXactConn(b, pool)
						vs = append(vs, &callVariant{name: form, hand: true, renew: x.renew,
							call: handCall(form, func() pgxExecer { return x.tx }, fns, same)})
					}
					runCalls(b, vs)
					reportCalls(b, s.Name+" TryXactLock in a pgx.Tx", vs)
				}
			})
		})
	}
}

// BenchmarkXactScopeVsHand measures pgxlock.WithXactLock with
// advisory.Try on a *pgxpool.Pool, fn doing nothing, against pgx.BeginFunc
// on a pool with the same statement by hand (see [handSame]) and the
// plainer forms: BEGIN, the try, COMMIT, three round trips, on fresh keys.
// Every variant has a pool of its own of one connection, so that each
// call finds its statements prepared; they run interleaved as in
// [BenchmarkCallsVsHand].
func BenchmarkXactScopeVsHand(b *testing.B) {
	ctx := context.Background()
	onePool := func(c *pgxpool.Config) { c.MaxConns = 1 }
	noop := func(context.Context, pgx.Tx) error { return nil }
	for _, s := range pgtest.Servers(b) {
		b.Run(s.Name, func(b *testing.B) {
			for range b.N {
				libPool := newPool(b, s.DSN, onePool)
				lib := &callVariant{name: "pgxlock", call: func(ctx context.Context, k int64) error {
					return pgxlock.WithXactLock(ctx, libPool, advisory.Int64Key(k), noop, advisory.Try())
				}}
				if err := lib.call(ctx, benchKeys.Add(1)); err != nil {
					b.Fatal(err)
				}
				same := preparedText(b, libPool, "pg_try_advisory_xact_lock")
				b.Logf("pgxlock's statement: %q", same)
				vs := []*callVariant{lib}
				for _, form := range handForms {
					pool := newPool(b, s.DSN, onePool)
					send, text := handForm(form, "pg_try_advisory_xact_lock", same)
					vs = append(vs, &callVariant{name: "BeginFunc-" + form, hand: true, call: func(ctx context.Context, k int64) error {
						return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return send(ctx, tx, text, k) })
					}})
				}
				runCalls(b, vs)
				reportCalls(b, s.Name+" WithXactLock(Try) against pgx.BeginFunc", vs)
			}
		})
	}
}
