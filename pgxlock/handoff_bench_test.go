package pgxlock_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/benchorder"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
	"github.com/pgadvisory/pgadvisory/pgxlock"
)

// handoffsPerRepeat is how many handoffs each variant makes in a repeat
// of BenchmarkHandoffVsHand.
const handoffsPerRepeat = 100

// A handoffSide locks and unlocks key k on a connection of its own.
type handoffSide struct {
	lock, unlock func(ctx context.Context) error
}

// libSide locks with pgxlock.Lock and unlocks with pgxlock.Unlock.
func libSide(conn *pgxpool.Conn, k int64) handoffSide {
	key := advisory.Int64Key(k)
	return handoffSide{
		lock:   func(ctx context.Context) error { return pgxlock.Lock(ctx, conn, key) },
		unlock: func(ctx context.Context) error { return pgxlock.Unlock(ctx, conn, key) },
	}
}

// handSide locks with "SELECT pg_catalog.pg_advisory_lock($1)" and
// unlocks with "SELECT pg_catalog.pg_advisory_unlock($1)", through
// Exec: the blocking statement answers nothing (void).
func handSide(conn *pgxpool.Conn, k int64) handoffSide {
	return handoffSide{
		lock: func(ctx context.Context) error {
			_, err := conn.Exec(ctx, "SELECT pg_catalog.pg_advisory_lock($1)", k)
			return err
		},
		unlock: func(ctx context.Context) error {
			return selectTrue(ctx, conn, "SELECT pg_catalog.pg_advisory_unlock($1)", k)
		},
	}
}

// sliceSide waits with text, the statement of a slice of pgxlock's wait
// (read from pg_prepared_statements: the slice of a session with no
// transaction block open), sent by hand with a bound of bound
// milliseconds, and unlocks as handSide does: what pgxlock's wait costs on
// the server, without pgxlock's Go.
func sliceSide(conn *pgxpool.Conn, k int64, text, bound string) handoffSide {
	s := handSide(conn, k)
	s.lock = func(ctx context.Context) error {
		_, err := conn.Exec(ctx, text, bound, k)
		return err
	}
	return s
}

// A handoffVariant hands key from a holder to a waiter and back.
type handoffVariant struct {
	name           string
	key            int64
	holder, waiter handoffSide
	p50            []float64 // the median handoff of each repeat, in ns
	p90            []float64
}

// handoffSettle is how long a waiter waits, once queued, before its
// holder releases: the same for every variant (see pgtest.AwaitQueued).
const handoffSettle = 5 * time.Millisecond

// handoff runs one handoff of v: the holder holds; the waiter starts
// waiting; once pg_locks shows it waiting, the holder releases. It returns
// the time from the release call to the waiter's return with the lock.
// The waiter then releases, and the holder takes the lock again.
func handoff(b *testing.B, obs *sql.DB, v *handoffVariant) time.Duration {
	ctx := context.Background()
	got := make(chan time.Time, 1)
	go func() {
		if err := v.waiter.lock(ctx); err != nil {
			b.Errorf("%s: waiter: %v", v.name, err)
		}
		got <- time.Now()
	}()
	pgtest.AwaitQueued(b, obs, advisory.Int64Key(v.key), handoffSettle)
	start := time.Now()
	if err := v.holder.unlock(ctx); err != nil {
		b.Fatalf("%s: holder's release: %v", v.name, err)
	}
	d := (<-got).Sub(start)
	if err := v.waiter.unlock(ctx); err != nil {
		b.Fatalf("%s: waiter's release: %v", v.name, err)
	}
	if err := v.holder.lock(ctx); err != nil {
		b.Fatalf("%s: holder: %v", v.name, err)
	}
	return d
}

// BenchmarkHandoffVsHand measures how long a waiter blocked on a session
// lock takes to get it after its holder releases it: pgxlock.Lock (the
// holder releasing with pgxlock.Unlock) against the same by hand through
// pgx, "SELECT pg_catalog.pg_advisory_lock($1)" and
// "SELECT pg_catalog.pg_advisory_unlock($1)", and against the statement of
// a slice of pgxlock's wait sent by hand (hand-slice), which tells the
// server's cost of a wait in slices from pgxlock's own. Each variant has a key and
// two connections of its own; the holder releases handoffSettle after
// pgtest.AwaitQueued first sees the waiter queued, and the time runs from
// the release call to the waiter's return.
// The variants interleave handoff by handoff, in an order shuffled anew
// for every round from a logged seed (PGADVISORY_BENCH_SEED); each repeat
// has handoffsPerRepeat handoffs of each, and it reports the median over
// benchRepeats repeats of each repeat's p50, and pgxlock's ratio, with
// their ranges.
func BenchmarkHandoffVsHand(b *testing.B) {
	ctx := context.Background()
	for _, s := range pgtest.Servers(b) {
		b.Run(s.Name, func(b *testing.B) {
			for range b.N {
				obs := s.Open(b, pgtest.DriverPQ)
				pool := newPool(b, s.DSN, func(c *pgxpool.Config) { c.MaxConns = 6 })
				base := benchKeys.Add(3)
				libWaiter := acquire(b, pool)
				vs := []*handoffVariant{
					{name: "pgxlock", key: base, holder: libSide(acquire(b, pool), base), waiter: libSide(libWaiter, base)},
					{name: "hand", key: base + 1, holder: handSide(acquire(b, pool), base+1), waiter: handSide(acquire(b, pool), base+1)},
				}
				warm := func(v *handoffVariant) {
					if err := v.holder.lock(ctx); err != nil {
						b.Fatalf("%s: %v", v.name, err)
					}
					// Warm up: the engine known, the statements
					// prepared on both connections.
					for range 3 {
						handoff(b, obs, v)
					}
				}
				for _, v := range vs {
					warm(v)
				}
				// The first slice of a wait with the default slice and
				// deadlock_timeout is 1.1 s long.
				slice := preparedText(b, libWaiter, "pg_advisory_lock")
				b.Logf("pgxlock's slice: %q", slice)
				vs = append(vs, &handoffVariant{name: "hand-slice", key: base + 2,
					holder: handSide(acquire(b, pool), base+2), waiter: sliceSide(acquire(b, pool), base+2, slice, "1100")})
				warm(vs[2])
				order := benchorder.New(b, len(vs))
				ds := make([][]time.Duration, len(vs))
				for range benchRepeats {
					for i := range ds {
						ds[i] = ds[i][:0]
					}
					for range handoffsPerRepeat {
						for _, i := range order.Next() {
							ds[i] = append(ds[i], handoff(b, obs, vs[i]))
						}
					}
					for i, v := range vs {
						v.p50 = append(v.p50, float64(quantile(ds[i], 0.5).Nanoseconds()))
						v.p90 = append(v.p90, float64(quantile(ds[i], 0.9).Nanoseconds()))
					}
				}
				for _, v := range vs {
					if err := v.holder.unlock(ctx); err != nil {
						b.Fatalf("%s: %v", v.name, err)
					}
				}
				reportHandoff(b, s.Name, vs)
			}
		})
	}
}

// reportHandoff reports each variant's median p50 in µs and pgxlock's
// ratio to the form by hand and to its own slice by hand, and logs them as a table with their ranges
// and the load average.
func reportHandoff(b *testing.B, server string, vs []*handoffVariant) {
	lib, hand := vs[0], vs[1]
	var rows [][]string
	for _, v := range vs {
		us := func(ns []float64) []float64 {
			r := make([]float64, len(ns))
			for i, x := range ns {
				r[i] = x / 1e3
			}
			return r
		}
		rows = append(rows, []string{v.name, spreadOf(us(v.p50)).format("%.0f") + " µs",
			spreadOf(us(v.p90)).format("%.0f") + " µs", spreadOf(ratios(v.p50, hand.p50)).format("%.3f"),
			spreadOf(ratios(lib.p50, v.p50)).format("%.3f")})
		b.ReportMetric(median(v.p50)/1e3, v.name+"-p50-µs")
	}
	b.ReportMetric(spreadOf(ratios(lib.p50, hand.p50)).med, lib.name+"/hand")
	b.ReportMetric(spreadOf(ratios(lib.p50, vs[2].p50)).med, lib.name+"/hand-slice")
	b.Logf("%s, %d repeats of %d handoffs each, interleaved; each repeat's p50 and p90, then the median (range) over the repeats; load average %s:\n%s",
		server, len(lib.p50), handoffsPerRepeat, loadAvg(),
		mdTable([]string{"variant", "p50", "p90", "p50 ÷ hand's", "pgxlock's p50 ÷ it"}, rows))
}
