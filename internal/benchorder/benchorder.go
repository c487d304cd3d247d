// Package benchorder draws the orders in which the interleaved
// benchmarks run their variants: shuffled, from a seed that a run logs
// and that PGADVISORY_BENCH_SEED sets, so that a run can be replayed.
// The benchmarks of advisory, pgxlock and ci/bench share it.
package benchorder

import (
	"hash/fnv"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Seed is the seed of every benchmark's order: PGADVISORY_BENCH_SEED when
// it is set, which ci/bench.sh sets and records, else one drawn from the
// clock.
var Seed = sync.OnceValue(func() uint64 {
	if s := os.Getenv("PGADVISORY_BENCH_SEED"); s != "" {
		if v, err := strconv.ParseUint(s, 10, 64); err == nil {
			return v
		}
	}
	return uint64(time.Now().UnixNano()) & (1<<53 - 1)
})

// streams numbers the orders drawn in this process, so that each run of
// a benchmark (-count) draws another order from the same seed.
var streams atomic.Uint64

// Rand returns the source of b's orders, seeded by [Seed] and b's name,
// so that a run with the same seed runs the same orders, and logs the
// seed.
func Rand(b *testing.B) *rand.Rand {
	b.Logf("order: shuffled, seed %d (PGADVISORY_BENCH_SEED)", Seed())
	return rand.New(rand.NewPCG(Seed(), nameHash(b)))
}

// An Order is a seeded shuffle of a benchmark's variants.
type Order struct {
	rng *rand.Rand
	idx []int
}

// New returns the order in which b's n variants run: each op calls Next,
// which shuffles them anew. It is seeded by [Seed], b's name and how many
// orders the process drew before, so that a run with the same seed and
// flags runs the same orders. It logs the seed.
func New(b *testing.B, n int) *Order {
	b.Logf("order: shuffled per op, seed %d (PGADVISORY_BENCH_SEED)", Seed())
	o := &Order{rng: rand.New(rand.NewPCG(Seed(), nameHash(b)^streams.Add(1))), idx: make([]int, n)}
	for i := range o.idx {
		o.idx[i] = i
	}
	return o
}

// Next shuffles the variants and returns their order, without
// allocating: the slice is reused by the next call.
func (o *Order) Next() []int {
	o.rng.Shuffle(len(o.idx), func(i, j int) { o.idx[i], o.idx[j] = o.idx[j], o.idx[i] })
	return o.idx
}

// nameHash hashes b's name.
func nameHash(b *testing.B) uint64 {
	h := fnv.New64a()
	h.Write([]byte(b.Name()))
	return h.Sum64()
}
