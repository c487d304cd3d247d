package leader_test

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
	"github.com/pgadvisory/pgadvisory/advisory/leader"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// TestFailoverLeadsAgainIntegration runs leader.Run on a DSN that names a
// primary and its streaming standby with target_session_attrs=read-write,
// on both drivers (lib/pq takes several hosts since v1.11, in a key=value
// DSN). The primary is killed and the standby promoted, as a failover
// tool would: the candidates lead again on the promoted standby, with a
// greater fencing token than any lead before the crash. It logs the time
// from the crash to the new leader; PGADVISORY_FAILOVER_RUNS repeats the
// failover on new pairs (docs/leases.md records the figures).
func TestFailoverLeadsAgainIntegration(t *testing.T) {
	t.Parallel()
	runs := 1
	if v := os.Getenv("PGADVISORY_FAILOVER_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("PGADVISORY_FAILOVER_RUNS=%q: want a positive number", v)
		}
		runs = n
	}
	var mu sync.Mutex
	took := map[string][]time.Duration{}     // pair/driver: crash to new leader
	promoted := map[string][]time.Duration{} // pair: crash to the end of pg_promote
	for run := range runs {
		t.Run("run"+strconv.Itoa(run+1), func(t *testing.T) {
			for _, p := range pgtest.StartStandbys(t) {
				t.Run(p.Name, func(t *testing.T) {
					t.Parallel()
					d, prom := failoverElection(t, p)
					mu.Lock()
					defer mu.Unlock()
					promoted[p.Name] = append(promoted[p.Name], prom)
					for k, v := range d {
						took[p.Name+"/"+k] = append(took[p.Name+"/"+k], v)
					}
				})
			}
		})
	}
	for _, k := range slices.Sorted(maps.Keys(took)) {
		t.Logf("%s: crash to new leader (heartbeat %v, promoted at once): %s", k, failoverHeartbeat, spread(took[k]))
	}
	for k, ds := range promoted {
		t.Logf("%s: crash to promoted: %s", k, spread(ds))
	}
}

// failoverHeartbeat is the candidates' heartbeat.
const failoverHeartbeat = 250 * time.Millisecond

// candidate is leader.Run on one driver's multi-host pool.
type candidate struct {
	db  *sql.DB
	key advisory.Key

	mu    sync.Mutex
	leads []lead // lead.cand is unused
	ended []time.Time
}

func (c *candidate) fn(ctx context.Context, l *advisory.Lease) error {
	c.mu.Lock()
	c.leads = append(c.leads, lead{token: l.Token(), at: time.Now()})
	c.mu.Unlock()
	<-ctx.Done()
	c.mu.Lock()
	c.ended = append(c.ended, time.Now())
	c.mu.Unlock()
	return nil
}

// await returns the first lead after from, waiting for it as
// [pgtest.Await] does.
func (c *candidate) await(t *testing.T, from time.Time) lead {
	t.Helper()
	var got lead
	pgtest.Await(t, "a lead", func() (bool, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, l := range c.leads {
			if !l.at.Before(from) {
				got = l
				return true, nil
			}
		}
		return false, nil
	})
	return got
}

// failoverElection runs a candidate per driver on p, kills the primary,
// promotes the standby, and returns the time from the crash to each
// driver's new leader, and to the end of the promotion.
func failoverElection(t *testing.T, p *pgtest.Pair) (map[string]time.Duration, time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	cands := map[string]*candidate{}
	var wg sync.WaitGroup
	errs := map[string]error{}
	var emu sync.Mutex
	for _, d := range pgtest.Drivers {
		c := &candidate{db: p.OpenMultiHost(t, d, "read-write"), key: randomKey()}
		cands[d] = c
		wg.Go(func() {
			err := leader.Run(ctx, c.db, c.key, c.fn, leader.Fencing(),
				leader.Heartbeat(failoverHeartbeat), leader.Backoff(50*time.Millisecond, 500*time.Millisecond))
			emu.Lock()
			errs[d] = err
			emu.Unlock()
		})
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		for d, err := range errs {
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s: Run = %v; want context.Canceled", d, err)
			}
		}
	})
	start := time.Now()
	first := map[string]lead{}
	for d, c := range cands {
		first[d] = c.await(t, start)
	}

	// The crash falls at a random phase of the heartbeats.
	time.Sleep(rand.N(failoverHeartbeat))
	crash := time.Now()
	p.Kill(t)
	p.Promote(t)
	prom := time.Since(crash)

	standby := p.Standby.Open(t, pgtest.DriverPGX)
	took := map[string]time.Duration{}
	for d, c := range cands {
		next := c.await(t, crash)
		took[d] = next.at.Sub(crash)
		if next.token <= first[d].token {
			t.Errorf("%s: the new leader's token %d is not greater than %d, the token of the lead before the crash",
				d, next.token, first[d].token)
		}
		locks, err := pgtest.LocksOf(context.Background(), standby, c.key)
		if err != nil {
			t.Fatal(err)
		}
		if len(locks) != 1 || !locks[0].Granted {
			t.Errorf("%s: pg_locks of the promoted standby shows %v for the new leader's key, want one holder", d, locks)
		}
		c.mu.Lock()
		if len(c.ended) == 0 {
			t.Errorf("%s: the lead on the killed primary never ended", d)
		}
		c.mu.Unlock()
	}
	t.Logf("promoted %v after the crash; new leaders %v after it", prom.Round(time.Millisecond), took)
	return took, prom
}

// spread summarizes durations as their median and maximum.
func spread(ds []time.Duration) string {
	s := slices.Sorted(slices.Values(ds))
	return fmt.Sprintf("p50 %v, max %v over %d", s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond), len(s))
}
