package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/pgtest"
	"github.com/pgadvisory/pgadvisory/internal/scope"
)

// Integration tests of leases through PgBouncer in transaction mode, where
// a session lock cannot work: each statement may land on another backend,
// and two clients may share one, where their locks stack. A lease must
// refuse at Acquire, or report itself lost within a heartbeat of a second
// client competing for its key; two clients never both believe they hold
// it for longer.

// poolerHeartbeat is the heartbeat of the leases taken through PgBouncer.
const poolerHeartbeat = 100 * time.Millisecond

// poolerRuns is the number of runs per server, driver and pool size.
const poolerRuns = 20

// poolerSplit counts how each run ended.
type poolerSplit struct {
	mu          sync.Mutex
	aAcquire    int // A's Acquire refused: the pooler error
	aHeartbeat  int // A acquired, then lost alone, before B came in
	bAcquire    int // B's Acquire refused: the pooler error
	bNotAcq     int // B's Try found the key held, on another backend
	bothLost    int // both acquired; one or both lost within the bound
	maxBothHeld time.Duration
}

func (s *poolerSplit) String() string {
	return fmt.Sprintf("A refused at Acquire %d, A lost by heartbeat alone %d, B refused at Acquire %d, B not acquired %d, "+
		"both acquired then lost by heartbeat %d (longest time both held %v)",
		s.aAcquire, s.aHeartbeat, s.bAcquire, s.bNotAcq, s.bothLost, s.maxBothHeld.Round(time.Millisecond))
}

// isPooler reports whether err is the lease's refusal of a shared session.
func isPooler(err error) bool {
	return errors.Is(err, scope.ErrPooler) && strings.Contains(err.Error(), "the session is shared")
}

// poolerRun runs one competition for a fresh key: client A takes a lease,
// holds it for a heartbeat, then client B tries to take one through the
// same PgBouncer.
func poolerRun(t *testing.T, key advisory.Key, dbA, dbB *sql.DB, s *poolerSplit) {
	t.Helper()
	ctx := context.Background()
	la, err := advisory.Acquire(ctx, dbA, key, advisory.Heartbeat(poolerHeartbeat))
	if isPooler(err) {
		s.mu.Lock()
		s.aAcquire++
		s.mu.Unlock()
		return
	}
	if err != nil {
		t.Fatalf("A: Acquire = %v; want success or the pooler error", err)
	}
	defer la.Release(ctx)
	time.Sleep(poolerHeartbeat + poolerHeartbeat/2)
	if la.Err() != nil {
		s.mu.Lock()
		s.aHeartbeat++
		s.mu.Unlock()
		return
	}
	lb, err := advisory.Acquire(ctx, dbB, key, advisory.Try(), advisory.Heartbeat(poolerHeartbeat))
	came := time.Now()
	switch {
	case isPooler(err):
		s.mu.Lock()
		s.bAcquire++
		s.mu.Unlock()
		return
	case errors.Is(err, advisory.ErrNotAcquired):
		s.mu.Lock()
		s.bNotAcq++
		s.mu.Unlock()
		return
	case err != nil:
		t.Fatalf("B: Acquire = %v; want the pooler error, ErrNotAcquired or success", err)
	}
	defer lb.Release(ctx)
	// Both believe they hold the key: one of them must learn otherwise
	// within the bound.
	select {
	case <-la.Done():
	case <-lb.Done():
	case <-time.After(leaseBound(poolerHeartbeat)):
		t.Fatalf("A and B both hold %s through PgBouncer %v after B acquired", key, time.Since(came))
	}
	both := time.Since(came)
	s.mu.Lock()
	s.bothLost++
	s.maxBothHeld = max(s.maxBothHeld, both)
	s.mu.Unlock()
}

func TestLeasePoolerIntegration(t *testing.T) {
	for _, srv := range pgtest.Servers(t) {
		for _, pool := range []int{1, 2, 4} {
			bouncer := srv.PgBouncer(t, pool)
			for _, d := range pgtest.Drivers {
				t.Run(fmt.Sprintf("%s/pool%d/%s", srv.Name, pool, d), func(t *testing.T) {
					t.Parallel()
					dbA, dbB := bouncer.Open(t, d), bouncer.Open(t, d)
					keys := newPGKeys()
					var s poolerSplit
					for range poolerRuns {
						poolerRun(t, keys.next(), dbA, dbB, &s)
					}
					t.Logf("lease through PgBouncer: %d runs: %v", poolerRuns, &s)
				})
			}
		}
	}
}
