package advisory_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// What a cancelled wait leaves on the server, as docs/concepts.md states it:
// every driver tells the server to stop waiting. lib/pq sends a
// CancelRequest; pgx by default closes the connection, sending a
// CancelRequest and then Terminate as it does (pgconn.asyncClose); pgx in
// its cancel-request mode sends a CancelRequest and keeps the session. A
// backend blocked in pg_advisory_lock does not read its socket, so without
// the CancelRequest it would wait for as long as the holder holds the key.

// cancelledWaits is how many cancelled waits each driver is checked with.
const cancelledWaits = 10

func TestCancelledWaitEndsOnServerIntegration(t *testing.T) {
	pgtest.EachDriver(t, pgAllDrivers, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		keys := newPGKeys()
		holder := pgtest.Conn(t, tg.DB)
		var took []time.Duration
		for i := range cancelledWaits {
			k := keys.next()
			if err := advisory.Lock(ctx, holder, k); err != nil {
				t.Fatalf("wait %d: holder: Lock(%s): %v", i, k, err)
			}
			waiter := pgtest.Conn(t, tg.DB)
			pid := pgtest.PID(t, waiter)
			_, err := pgEndWhileWaiting(t, tg.DB, pid, k, context.Canceled, func(wctx context.Context) error {
				return advisory.Lock(wctx, waiter, k)
			})
			cancelled := time.Now()
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("wait %d: Lock cancelled while it waits = %v; want an error wrapping context.Canceled", i, err)
			}

			// The holder keeps the key throughout: only a CancelRequest
			// can end the wait now.
			pgtest.Await(t, fmt.Sprintf("wait %d: the server to stop waiting for %s after the cancel", i, k), func() (bool, error) {
				locks, err := pgQueryLocksOfKey(ctx, tg.DB, k)
				return !slices.ContainsFunc(locks, func(l pgLock) bool { return !l.granted }), err
			})
			took = append(took, time.Since(cancelled))
			pgRequireHolds(t, tg.DB, pgtest.PID(t, holder), k, false)
			if err := advisory.Unlock(ctx, holder, k); err != nil {
				t.Fatalf("wait %d: holder: Unlock(%s): %v", i, k, err)
			}
			pgRequireFree(t, tg.DB, k)
		}
		slices.Sort(took)
		t.Logf("%d cancelled waits: the server stopped waiting within %v (median), %v (max)", len(took), took[len(took)/2], took[len(took)-1])
	})
}
