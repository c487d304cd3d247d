package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The forms of SQL by hand that the lock benchmarks set beside the
// library, and the seeded order in which the interleaved ones run.

// A handForm is one way to write a lock call by hand: through
// ExecContext, reading the answer from RowsAffected, or through
// QueryRowContext, scanning it; as "SELECT 1 WHERE f(k)", whose rows are
// the answer, or as "SELECT f(k)", whose value is; the key in the text or
// as a parameter. ExecContext with the plain SELECT has no answer to
// read, which a try needs, so it is not among them.
type handForm struct {
	name  string // "exec-where-inline", ...
	query bool   // QueryRowContext, else ExecContext
	where bool   // SELECT 1 WHERE f(k), else SELECT f(k)
	param bool   // f($1), else f(42)
}

// handForms are every form of [handForm].
var handForms = []handForm{
	{"exec-where-inline", false, true, false},
	{"exec-where-param", false, true, true},
	{"query-select-inline", true, false, false},
	{"query-select-param", true, false, true},
	{"query-where-inline", true, true, false},
	{"query-where-param", true, true, true},
}

// benchDB is what *sql.Conn and *sql.Tx have in common.
type benchDB interface {
	benchExecer
	benchQueryer
}

var (
	_ benchDB = (*sql.Conn)(nil)
	_ benchDB = (*sql.Tx)(nil)
)

// call sends fn(k), a boolean function of PostgreSQL's such as
// "pg_try_advisory_lock", in form f on q, and requires it to answer true.
func (f handForm) call(ctx context.Context, q benchDB, fn string, k int64) error {
	var args []any
	text := "pg_catalog." + fn + "($1)"
	if f.param {
		args = []any{k}
	} else {
		text = "pg_catalog." + fn + "(" + strconv.FormatInt(k, 10) + ")"
	}
	switch {
	case !f.query:
		return execOne(ctx, q, "SELECT 1 WHERE "+text, args...)
	case f.where:
		var one int
		err := q.QueryRowContext(ctx, "SELECT 1 WHERE "+text, args...).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%s(%d): false", fn, k)
		}
		return err
	}
	return queryBool(ctx, q, "SELECT "+text, args...)
}

// benchSeed is the seed of every interleaved benchmark's order:
// PGADVISORY_BENCH_SEED when it is set, which ci/bench.sh sets and
// records, else one drawn from the clock. Each benchmark logs it.
var benchSeed = sync.OnceValue(func() uint64 {
	if s := os.Getenv("PGADVISORY_BENCH_SEED"); s != "" {
		if v, err := strconv.ParseUint(s, 10, 64); err == nil {
			return v
		}
	}
	return uint64(time.Now().UnixNano()) & (1<<53 - 1)
})

// orderStreams numbers the orders drawn in this process, so that each run
// of a benchmark (-count) draws another order from the same seed.
var orderStreams atomic.Uint64

// newOrder returns the order in which b's n variants run: each op calls
// next, which shuffles them anew. It is seeded by [benchSeed], b's name
// and how many orders the process drew before, so that a run with the
// same seed and flags runs the same orders. It logs the seed.
func newOrder(b *testing.B, n int) *order {
	h := fnv.New64a()
	h.Write([]byte(b.Name()))
	b.Logf("order: shuffled per op, seed %d (PGADVISORY_BENCH_SEED)", benchSeed())
	o := &order{rng: rand.New(rand.NewPCG(benchSeed(), h.Sum64()^orderStreams.Add(1))), idx: make([]int, n)}
	for i := range o.idx {
		o.idx[i] = i
	}
	return o
}

// An order is a seeded shuffle of a benchmark's variants.
type order struct {
	rng *rand.Rand
	idx []int
}

// next shuffles the variants and returns their order, without
// allocating: the slice is reused by the next call.
func (o *order) next() []int {
	o.rng.Shuffle(len(o.idx), func(i, j int) { o.idx[i], o.idx[j] = o.idx[j], o.idx[i] })
	return o.idx
}

// reportBest reports, for every variant that is not by hand, its mean
// time over that of the fastest variant by hand of its group, as
// "<name>/best". times are the variants' mean times per call.
func reportBest(b *testing.B, names, groups []string, hand []bool, times []float64) {
	for i := range names {
		if hand[i] || groups[i] == "" {
			continue
		}
		best := 0.0
		for j := range names {
			if hand[j] && groups[j] == groups[i] && (best == 0 || times[j] < best) {
				best = times[j]
			}
		}
		if best > 0 {
			b.ReportMetric(times[i]/best, names[i]+"/best")
		}
	}
}
