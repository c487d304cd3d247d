package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// Integration tests of fencing tokens across a failover
// (TestFencingIntegration/FailoverTokens): a primary with a streaming standby
// (asynchronous, PostgreSQL's default), fenced leases on the primary, the
// primary killed, the standby promoted. Tokens must go on increasing on
// the new primary, also when the promotion lost the WAL of the last ones,
// and a lease held on the dead primary must learn of its loss within its
// heartbeat bound.

// failoverRuns is how many failovers each server gets: 1 in the default
// run, PGADVISORY_FAILOVER_RUNS when that is set (docs/leases.md records
// 20).
func failoverRuns(t *testing.T) int {
	v := os.Getenv("PGADVISORY_FAILOVER_RUNS")
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("PGADVISORY_FAILOVER_RUNS=%q: want a positive number", v)
	}
	return n
}

// failoverHeartbeat is the heartbeat of the leases held at the crash: a
// loss is signalled within 2 × failoverHeartbeat.
const failoverHeartbeat = 250 * time.Millisecond

// fencedToken takes a fenced lease on a key of its own on db, releases it,
// and returns its token.
func fencedToken(ctx context.Context, t *testing.T, db *sql.DB) int64 {
	t.Helper()
	l, err := advisory.Acquire(ctx, db, advisory.PairKey(0xfa110, rand.Int32()), advisory.Fencing(), advisory.Try())
	if err != nil {
		t.Fatalf("fenced Acquire: %v", err)
	}
	tok := l.Token()
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	return tok
}

// tokenLog is every token one server handed out, in order.
type tokenLog struct {
	t    *testing.T
	max  int64
	n    int
	desc string
}

// add records tok, which must be greater than every token before it.
func (g *tokenLog) add(tok int64, what string) {
	g.t.Helper()
	if g.n > 0 && tok <= g.max {
		g.t.Errorf("%s: token %d after %d (%s): not greater", what, tok, g.max, g.desc)
	}
	g.desc = what
	g.max = max(g.max, tok)
	g.n++
}

func testFencingFailoverTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var mu sync.Mutex
	lost := map[string][]time.Duration{} // pair/driver: crash to the lease's loss
	for run := range failoverRuns(t) {
		t.Run("run"+strconv.Itoa(run+1), func(t *testing.T) {
			for _, p := range pgtest.StartStandbys(t) {
				t.Run(p.Name, func(t *testing.T) {
					t.Parallel()
					d := failover(ctx, t, p)
					mu.Lock()
					for k, v := range d {
						lost[p.Name+"/"+k] = append(lost[p.Name+"/"+k], v)
					}
					mu.Unlock()
				})
			}
		})
	}
	for _, k := range slices.Sorted(maps.Keys(lost)) {
		t.Logf("%s: crash to lease lost (heartbeat %v; kill: the kill call itself): %s", k, failoverHeartbeat, spread(lost[k]))
	}
}

// failover runs one failover on p with both drivers and returns, per
// driver, the time from the crash to the loss of the lease held on the
// primary, and under "kill" the time the kill itself took, from the call
// to the container's exit.
func failover(ctx context.Context, t *testing.T, p *pgtest.Pair) map[string]time.Duration {
	primary := map[string]*sql.DB{}
	for _, d := range pgtest.Drivers {
		primary[d] = p.Primary.Open(t, d)
	}
	g := &tokenLog{t: t}
	// Tokens the standby has replayed...
	for i := range 10 {
		for _, d := range pgtest.Drivers {
			g.add(fencedToken(ctx, t, primary[d]), fmt.Sprintf("primary, %s, replayed token %d", d, i))
		}
	}
	p.AwaitReplay(t)
	// ...and tokens whose WAL never reaches it: asynchronous
	// replication loses them at the promotion.
	p.Cut(t)
	for i := range 50 {
		for _, d := range pgtest.Drivers {
			g.add(fencedToken(ctx, t, primary[d]), fmt.Sprintf("primary, %s, unreplicated token %d", d, i))
		}
	}
	// Leases held at the crash.
	leases := map[string]*advisory.Lease{}
	for _, d := range pgtest.Drivers {
		l, err := advisory.Acquire(ctx, primary[d], advisory.PairKey(0xfa110, rand.Int32()),
			advisory.Fencing(), advisory.Heartbeat(failoverHeartbeat))
		if err != nil {
			t.Fatalf("%s: Acquire: %v", d, err)
		}
		t.Cleanup(func() { _ = l.Release(context.Background()) })
		g.add(l.Token(), "primary, "+d+", lease held at the crash")
		leases[d] = l
	}
	oldMax := g.max

	// The moment each lease learns of its loss, recorded as it happens.
	var lmu sync.Mutex
	lostAt := map[string]time.Time{}
	for d, l := range leases {
		stop := context.AfterFunc(l.Context(), func() {
			lmu.Lock()
			lostAt[d] = time.Now()
			lmu.Unlock()
		})
		defer stop()
	}

	// The crash falls at a random phase of the heartbeats. It is timed
	// from the call that kills the container: the server dies during
	// the call, which under load takes hundreds of milliseconds.
	time.Sleep(rand.N(failoverHeartbeat))
	crash := time.Now()
	p.Kill(t)
	lostAfter := map[string]time.Duration{"kill": time.Since(crash)} // the kill call's own time
	bound := 2*failoverHeartbeat + 10*time.Second                    // the bound, and slack for a loaded machine
	for _, d := range pgtest.Drivers {
		l := leases[d]
		select {
		case <-l.Context().Done():
		case <-time.After(bound - time.Since(crash)):
			t.Fatalf("%s: the lease on the killed primary was not lost within %v", d, bound)
		}
		// The AfterFunc runs a moment after Done.
		pgtest.Await(t, d+": the lease's AfterFunc", func() (bool, error) {
			lmu.Lock()
			defer lmu.Unlock()
			return !lostAt[d].IsZero(), nil
		})
		lmu.Lock()
		lostAfter[d] = lostAt[d].Sub(crash)
		lmu.Unlock()
		if !errors.Is(l.Err(), advisory.ErrLockLost) {
			t.Errorf("%s: lease Err = %v, want ErrLockLost", d, l.Err())
		}
		t.Logf("%s: lost %v after the crash: %v", d, lostAfter[d].Round(time.Millisecond), l.Err())
	}

	p.Promote(t)
	for _, d := range pgtest.Drivers {
		db := p.Standby.Open(t, d)
		for i := range 5 {
			g.add(fencedToken(ctx, t, db), fmt.Sprintf("promoted standby, %s, token %d", d, i))
		}
	}
	t.Logf("primary handed out tokens up to %d; the promoted standby's are up to %d; leases lost %v after the crash",
		oldMax, g.max, lostAfter)
	return lostAfter
}

// spread summarizes durations as their median and maximum.
func spread(ds []time.Duration) string {
	s := slices.Sorted(slices.Values(ds))
	return fmt.Sprintf("p50 %v, max %v over %d", s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond), len(s))
}
