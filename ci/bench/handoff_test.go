package bench_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/benchorder"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// A side is one party of a handoff: the holder or the waiter.
type side interface {
	lock(ctx context.Context) error
	unlock(ctx context.Context) error
}

// A handoffVariant is one way to hand a lock from a holder to a waiter.
type handoffVariant struct {
	name    string
	hand    bool // SQL by hand, which the library is set against
	n       int  // handoffs per repeat
	holder  side
	waiter  side
	waiting func() // returns once the waiter is waiting
}

// rawSide locks with SQL written by hand, through ExecContext: the
// statement text with the key in it, or, with param, the $1 form. The
// blocking statement answers nothing (void), so ExecContext is the form to
// send it in.
type rawSide struct {
	conn  *sql.Conn
	key   int64
	param bool
}

func (s rawSide) exec(ctx context.Context, fn string) error {
	var err error
	if s.param {
		_, err = s.conn.ExecContext(ctx, "SELECT pg_catalog."+fn+"($1)", s.key)
	} else {
		_, err = s.conn.ExecContext(ctx, "SELECT pg_catalog."+fn+"("+strconv.FormatInt(s.key, 10)+")")
	}
	return err
}
func (s rawSide) lock(ctx context.Context) error   { return s.exec(ctx, "pg_advisory_lock") }
func (s rawSide) unlock(ctx context.Context) error { return s.exec(ctx, "pg_advisory_unlock") }

// libSide locks with advisory.Lock and advisory.Unlock.
type libSide struct {
	conn *sql.Conn
	key  advisory.Key
}

func (s libSide) lock(ctx context.Context) error   { return advisory.Lock(ctx, s.conn, s.key) }
func (s libSide) unlock(ctx context.Context) error { return advisory.Unlock(ctx, s.conn, s.key) }

// pollSide waits by polling: advisory.TryLock, then a sleep of 50–150 ms,
// as polling lock libraries do.
type pollSide struct{ libSide }

func (s pollSide) lock(ctx context.Context) error {
	for {
		ok, err := advisory.TryLock(ctx, s.conn, s.key)
		if err != nil || ok {
			return err
		}
		time.Sleep(50*time.Millisecond + rand.N(100*time.Millisecond))
	}
}

// redsyncSide locks a redsync mutex with its default options.
type redsyncSide struct{ m *redsync.Mutex }

func (s redsyncSide) lock(ctx context.Context) error { return s.m.LockContext(ctx) }
func (s redsyncSide) unlock(ctx context.Context) error {
	_, err := s.m.UnlockContext(ctx)
	return err
}

// handoffSettle is how long a blocked waiter waits, once queued, before
// its holder releases: the same for every variant, however many
// statements it sent before it queued (see pgtest.AwaitQueued).
const handoffSettle = 5 * time.Millisecond

// handoff runs one handoff: the holder holds; the waiter starts waiting;
// the holder releases; it returns the time from the release call to the
// waiter's acquisition. The waiter then releases, and the holder takes
// the lock again for the next handoff.
func handoff(b *testing.B, v *handoffVariant) time.Duration {
	ctx := context.Background()
	got := make(chan time.Time, 1)
	go func() {
		if err := v.waiter.lock(ctx); err != nil {
			b.Errorf("%s: waiter: %v", v.name, err)
		}
		got <- time.Now()
	}()
	v.waiting()
	start := time.Now()
	if err := v.holder.unlock(ctx); err != nil {
		b.Fatalf("%s: holder release: %v", v.name, err)
	}
	d := (<-got).Sub(start)
	if err := v.waiter.unlock(ctx); err != nil {
		b.Fatalf("%s: waiter release: %v", v.name, err)
	}
	if err := v.holder.lock(ctx); err != nil {
		b.Fatalf("%s: holder: %v", v.name, err)
	}
	return d
}

// handoffsPerRepeat is how many handoffs the library and each
// hand-written form make in a repeat: enough that a repeat's p50 moves by
// less than the few per cent the forms differ by.
const handoffsPerRepeat = 200

// handoffRepeats is how many times each variant runs its handoffs, the
// variants interleaved within each repeat.
const handoffRepeats = 5

// BenchmarkHandoff measures how long a blocked waiter takes to get a lock
// after its holder releases it (p50 per repeat), on each server and
// driver: the library (advisory.Lock, advisory.Unlock), and the library's
// waiter alone (library-waiter: advisory.Lock, released by the driver's
// faster unlock by hand: raw's on lib/pq, raw-param's on pgx), against SQL written by hand (the key
// in the text, and as $1), against polling every
// 50–150 ms, and against redsync with its default options on a local
// Redis. The variants interleave handoff by handoff, one handoff of each
// in every round, in an order shuffled anew for every round from a seed
// (PGADVISORY_BENCH_SEED), so that they share the machine's load and none
// always follows the same one; it reports the median p50 of each and the
// ratios of the library to the best hand-written form (the one whose
// median is the least), repeat by repeat, with their ranges over the
// repeats. A blocked waiter is released handoffSettle after it is first
// seen queued, whichever form it is. Each b.N runs handoffRepeats
// repeats; run it with -benchtime=1x.
func BenchmarkHandoff(b *testing.B) {
	rdb := startRedis(b)
	rs := redsync.New(goredis.NewPool(rdb))
	b.Cleanup(func() { writeResults(b) })
	for _, s := range pgtest.Servers(b) {
		noteServer(b, s)
		for _, driver := range []string{pgtest.DriverPQ, pgtest.DriverPGX} {
			group := s.Name + "/" + driver
			b.Run(group, func(b *testing.B) {
				vs := handoffVariants(b, s, driver, rs, rdb)
				rng := benchorder.Rand(b)
				p50 := map[string][]float64{}
				samples := map[string][]time.Duration{}
				for range b.N * handoffRepeats {
					// Rounds of one handoff of each variant, in an order
					// shuffled every round; a variant with a smaller n
					// takes part in every few rounds, spread over the
					// repeat, so that no holder holds for long (redsync's
					// lock expires after 8 s).
					ds := map[string][]time.Duration{}
					rounds := slices.MaxFunc(vs, func(a, b *handoffVariant) int { return a.n - b.n }).n
					for i := range rounds {
						for _, j := range rng.Perm(len(vs)) {
							v := vs[j]
							if i*v.n/rounds != (i+1)*v.n/rounds {
								ds[v.name] = append(ds[v.name], handoff(b, v))
							}
						}
					}
					for _, v := range vs {
						samples[v.name] = append(samples[v.name], ds[v.name]...)
						p50[v.name] = append(p50[v.name], float64(quantile(ds[v.name], 0.5)))
					}
				}
				reportHandoff(b, group, vs, p50, samples)
			})
		}
	}
}

// handoffVariants sets up the variants of one server and driver, each on
// a key and connections of its own, the holder holding.
func handoffVariants(b *testing.B, s *pgtest.Server, driver string, rs *redsync.Redsync, rdb *redis.Client) []*handoffVariant {
	obs := s.Open(b, driver)
	db := s.Open(b, driver)
	conn := func() *sql.Conn { return pgtest.Conn(b, db) }
	base := rand.Int64N(1<<40) + 1
	awaitWaiting := func(k int64) func() {
		return func() { pgtest.AwaitQueued(b, obs, advisory.Int64Key(k), handoffSettle) }
	}
	// The pollers and redsync's waiter sleep between tries: release at a
	// random moment of their sleep.
	randomMoment := func() { time.Sleep(rand.N(20 * time.Millisecond)) }
	// raw-param on lib/pq costs a round trip more before the wait, which
	// the handoff does not time.
	vs := []*handoffVariant{
		{name: "raw", hand: true, n: handoffsPerRepeat, holder: rawSide{conn(), base, false}, waiter: rawSide{conn(), base, false}, waiting: awaitWaiting(base)},
		{name: "library", n: handoffsPerRepeat, holder: libSide{conn(), advisory.Int64Key(base + 1)}, waiter: libSide{conn(), advisory.Int64Key(base + 1)}, waiting: awaitWaiting(base + 1)},
		{name: "raw-param", hand: true, n: handoffsPerRepeat, holder: rawSide{conn(), base + 2, true}, waiter: rawSide{conn(), base + 2, true}, waiting: awaitWaiting(base + 2)},
		// The library's wait alone, released by the driver's faster
		// unlock by hand: the key in the text on lib/pq (a $1 costs it a
		// round trip), $1 on pgx (prepared, where the text is parsed).
		{name: "library-waiter", n: handoffsPerRepeat, holder: rawSide{conn(), base + 4, driver == pgtest.DriverPGX}, waiter: libSide{conn(), advisory.Int64Key(base + 4)}, waiting: awaitWaiting(base + 4)},
	}
	vs = append(vs,
		&handoffVariant{name: "polling", n: 6, holder: libSide{conn(), advisory.Int64Key(base + 3)},
			waiter: pollSide{libSide{conn(), advisory.Int64Key(base + 3)}}, waiting: randomMoment},
	)
	name := fmt.Sprintf("pgadvisory-bench-%d", base)
	vs = append(vs, &handoffVariant{name: "redsync", n: 6,
		holder: redsyncSide{rs.NewMutex(name)}, waiter: redsyncSide{rs.NewMutex(name)}, waiting: randomMoment})
	holdAll(b, vs)
	b.Cleanup(func() { _ = rdb.Del(context.Background(), name).Err() })
	return vs
}

// holdAll has every variant's holder take its lock, and releases them all
// at b's cleanup.
func holdAll(b *testing.B, vs []*handoffVariant) {
	for _, v := range vs {
		if err := v.holder.lock(context.Background()); err != nil {
			b.Fatalf("%s: %v", v.name, err)
		}
	}
	b.Cleanup(func() {
		for _, v := range vs {
			_ = v.holder.unlock(context.Background())
		}
	})
}

// reportHandoff reports each variant's median p50 as a metric, the
// library's ratio to the best hand-written form and the slow waits' ratio
// to the library, and logs them as a table with their ranges.
func reportHandoff(b *testing.B, group string, vs []*handoffVariant, p50 map[string][]float64, samples map[string][]time.Duration) {
	// best is the p50 of the best hand-written form in each repeat.
	var hand []string
	for _, v := range vs {
		if v.hand {
			hand = append(hand, v.name)
		}
	}
	best, _ := bestForm(p50, hand, false)
	ratios := func(num string) []float64 {
		r := make([]float64, len(p50[num]))
		for i := range r {
			r[i] = p50[num][i] / best[i]
		}
		return r
	}
	var rows [][]string
	for _, v := range vs {
		addSamples(group, v.name, samples[v.name])
		for _, x := range p50[v.name] {
			record("handoff", group, v.name, x)
		}
		record("handoff-p99", group, v.name, float64(quantile(samples[v.name], 0.99)))
		med := quantile(p50[v.name], 0.5)
		b.ReportMetric(med/1e3, v.name+"-p50-µs")
		row := []string{v.name, fmt.Sprintf("%.0f µs", med/1e3),
			fmt.Sprintf("%.0f µs", float64(quantile(samples[v.name], 0.99))/1e3)}
		r := spreadOf(ratios(v.name))
		row = append(row, r.String())
		rows = append(rows, row)
		if !v.hand {
			b.ReportMetric(r.med, v.name+"/best")
		}
	}
	b.Logf("%s, %d repeats, p50 of each repeat's handoffs, then the median over repeats:\n%s", group, len(p50["raw"]),
		table([]string{"variant", "p50", "p99 of all", "÷ best hand-written (range)"}, rows))
}
