package bench_test

import (
	"math/rand/v2"
)

// shuffled returns 0 … n-1 in an order drawn from r.
func shuffled(r *rand.Rand, n int) []int { return r.Perm(n) }
