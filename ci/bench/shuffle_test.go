package bench_test

import (
	"hash/fnv"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// benchSeed is the seed of every benchmark's order: PGADVISORY_BENCH_SEED
// when it is set, which ci/bench.sh sets and records, else one drawn from
// the clock. Each benchmark logs it.
var benchSeed = sync.OnceValue(func() uint64 {
	if s := os.Getenv("PGADVISORY_BENCH_SEED"); s != "" {
		if v, err := strconv.ParseUint(s, 10, 64); err == nil {
			return v
		}
	}
	return uint64(time.Now().UnixNano()) & (1<<53 - 1)
})

// newRand returns the source of b's orders, seeded by [benchSeed] and b's
// name, so that a run with the same seed runs the same orders, and logs
// the seed.
func newRand(b *testing.B) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(b.Name()))
	b.Logf("order: shuffled, seed %d (PGADVISORY_BENCH_SEED)", benchSeed())
	return rand.New(rand.NewPCG(benchSeed(), h.Sum64()))
}

// shuffled returns 0 … n-1 in an order drawn from r.
func shuffled(r *rand.Rand, n int) []int { return r.Perm(n) }
