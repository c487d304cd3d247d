package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// noAnswerTries bounds how many leases TestLeaseIntegration/PoolerNoAnswer
// takes to see enough heartbeats go unanswered in time.
const (
	noAnswerTries = 200
	noAnswerWant  = 5
)

// testLeasePoolerNoAnswer checks that a lease lost for want of an answer
// through a transaction pooler leaves nothing on the server. Its
// heartbeat, every millisecond and answered within one, is often answered
// just too late: the client closes its connection, while PgBouncer has
// already put the lease's backend, which still holds the lock and bears
// the mark, back in its pool. The lease undoes both through another of
// its pool's connections; the test requires the key free after each such
// loss, on a pool of one backend, where every later client would
// otherwise find the lock and the mark. A Locker's connection does the
// same with its locks.
func testLeasePoolerNoAnswer(t *testing.T) {
	holders := []struct {
		name    string
		acquire func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key) (*advisory.Lease, func(), error)
	}{
		{"Lease", func(ctx context.Context, _ *testing.T, db *sql.DB, key advisory.Key) (*advisory.Lease, func(), error) {
			l, err := advisory.Acquire(ctx, db, key, advisory.Try(), advisory.Heartbeat(time.Millisecond))
			return l, func() {}, err
		}},
		{"Locker", func(ctx context.Context, t *testing.T, db *sql.DB, key advisory.Key) (*advisory.Lease, func(), error) {
			lk, err := advisory.NewLocker(db, advisory.LockerConfig{Heartbeat: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			l, err := lk.Acquire(ctx, key, advisory.Try())
			return l, func() { _ = lk.Close(ctx) }, err
		}},
	}
	for _, srv := range pgtest.Servers(t) {
		direct := srv.Open(t, pgtest.DriverPQ)
		for _, d := range pgtest.Drivers {
			for _, h := range holders {
				t.Run(srv.Name+"/"+d+"/"+h.name, func(t *testing.T) {
					t.Parallel()
					bouncer := srv.PgBouncer(t, 1)
					db := bouncer.Open(t, d)
					ctx := context.Background()
					keys := newPGKeys()
					lost := 0
					for try := 0; try < noAnswerTries && lost < noAnswerWant; try++ {
						key := keys.next()
						l, end, err := h.acquire(ctx, t, db, key)
						if err != nil {
							end()
							// The first beat may run before Acquire's end:
							// nothing is held after a failed Acquire.
							pgtest.AwaitFree(t, direct, key)
							continue
						}
						select {
						case <-l.Done():
							err = l.Err()
							_ = l.Release(ctx)
						case <-time.After(time.Second):
							// Every beat answered in time so far, unless a
							// beat goes unanswered while Release runs.
							err = l.Release(ctx)
							if err == nil {
								end()
								pgtest.AwaitFree(t, direct, key)
								continue
							}
						}
						end()
						if !errors.Is(err, advisory.ErrLockLost) {
							t.Fatalf("lease ended with %v; want ErrLockLost", err)
						}
						if strings.Contains(err.Error(), "no answer") {
							lost++
						}
						pgtest.AwaitFree(t, direct, key)
						// The pooled backend bears no mark either: a lease on
						// another key is not refused.
						l2, err := advisory.Acquire(ctx, db, keys.next(), advisory.Try(), advisory.Heartbeat(time.Hour))
						if err != nil {
							t.Fatalf("after a lost lease, Acquire through the pool of one = %v; want success", err)
						}
						if err := l2.Release(ctx); err != nil {
							t.Fatal(err)
						}
					}
					t.Logf("%d leases lost for want of an answer", lost)
					if lost == 0 {
						t.Fatalf("no heartbeat of %d leases went unanswered in time: nothing proved", noAnswerTries)
					}
				})
			}
		}
	}
}
