package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// Integration tests of leases on a shared server: acquisition, release,
// fencing tokens, and loss when the holder's backend is terminated.

// pgLeasePID returns the backend that holds key, as pg_locks shows it.
func pgLeasePID(t *testing.T, db *sql.DB, key advisory.Key) int {
	t.Helper()
	locks := pgLocksOfKey(t, db, key)
	for _, l := range locks {
		if l.granted {
			return l.pid
		}
	}
	t.Fatalf("no backend holds %s: %v", key, locks)
	return 0
}

// awaitBeats waits until each of ls has been proved by n more heartbeats
// than when it was called, or has been lost, which ends its heartbeats;
// the caller then checks l.Err. A test that lets leases live through
// heartbeats waits for the heartbeats with it, however late a loaded
// machine makes them, instead of sleeping for some intervals.
func awaitBeats(t *testing.T, n int64, ls ...*advisory.Lease) {
	t.Helper()
	start := make([]int64, len(ls))
	for i, l := range ls {
		start[i] = advisory.Beats(l)
	}
	pgtest.Await(t, fmt.Sprintf("%d heartbeats of %d leases", n, len(ls)), func() (bool, error) {
		for i, l := range ls {
			if advisory.Beats(l)-start[i] < n && l.Err() == nil {
				return false, nil
			}
		}
		return true, nil
	})
}

func TestLeaseIntegration(t *testing.T) {
	pgtest.EachDriver(t, pgAllDrivers, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		keys := newPGKeys()

		t.Run("AcquireRelease", func(t *testing.T) {
			key := keys.next()
			l, err := advisory.Acquire(ctx, tg.DB, key, advisory.Heartbeat(200*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			if l.Key() != key || l.Err() != nil || l.Token() != 0 {
				t.Fatalf("Key %v, Err %v, Token %d", l.Key(), l.Err(), l.Token())
			}
			other := pgtest.Conn(t, tg.DB)
			if ok, err := advisory.TryLock(ctx, other, key); ok || err != nil {
				t.Fatalf("TryLock while leased = %v, %v", ok, err)
			}
			awaitBeats(t, 3, l)
			if err := l.Err(); err != nil {
				t.Fatalf("lease lost while held: %v", err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatalf("second Release: %v", err)
			}
			if !errors.Is(l.Err(), context.Canceled) {
				t.Fatalf("Err after Release = %v; want context.Canceled", l.Err())
			}
			select {
			case <-l.Done():
			default:
				t.Fatal("Done not closed after Release")
			}
			if ok, err := advisory.TryLock(ctx, other, key); !ok || err != nil {
				t.Fatalf("TryLock after Release = %v, %v", ok, err)
			}
		})

		t.Run("TryBusy", func(t *testing.T) {
			key := keys.next()
			holder := pgtest.Conn(t, tg.DB)
			if err := advisory.Lock(ctx, holder, key); err != nil {
				t.Fatal(err)
			}
			if _, err := advisory.Acquire(ctx, tg.DB, key, advisory.Try()); !errors.Is(err, advisory.ErrNotAcquired) {
				t.Fatalf("got %v; want ErrNotAcquired", err)
			}
			if _, err := advisory.Acquire(ctx, tg.DB, key, advisory.Wait(50*time.Millisecond)); !errors.Is(err, advisory.ErrLockTimeout) {
				t.Fatalf("got %v; want ErrLockTimeout", err)
			}
		})

		t.Run("Shared", func(t *testing.T) {
			key := keys.next()
			a, err := advisory.Acquire(ctx, tg.DB, key, advisory.Shared(), advisory.Heartbeat(200*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			b, err := advisory.Acquire(ctx, tg.DB, key, advisory.Shared(), advisory.Try(), advisory.Heartbeat(200*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			awaitBeats(t, 2, a, b)
			if a.Err() != nil || b.Err() != nil {
				t.Fatalf("shared leases lost: %v, %v", a.Err(), b.Err())
			}
			if err := errors.Join(a.Release(ctx), b.Release(ctx)); err != nil {
				t.Fatal(err)
			}
		})

		t.Run("FencingTokensIncrease", func(t *testing.T) {
			key := keys.next()
			var last int64
			for i := range 5 {
				l, err := advisory.Acquire(ctx, tg.DB, key, advisory.Fencing())
				if err != nil {
					t.Fatal(err)
				}
				if l.Token() <= last {
					t.Fatalf("holder %d got token %d after %d", i, l.Token(), last)
				}
				last = l.Token()
				if err := l.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})

		t.Run("Watch", func(t *testing.T) {
			key := keys.next()
			conn := pgtest.Conn(t, tg.DB)
			if err := advisory.Lock(ctx, conn, key); err != nil {
				t.Fatal(err)
			}
			l, err := advisory.Watch(ctx, conn, key, advisory.WatchConfig{Heartbeat: 200 * time.Millisecond, Fencing: true})
			if err != nil {
				t.Fatal(err)
			}
			if l.Token() <= 0 {
				t.Fatalf("Token %d; want a fencing token", l.Token())
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			pgtest.AwaitFree(t, tg.DB, key)
			// A lock conn does not hold is refused, and conn discarded.
			conn2 := pgtest.Conn(t, tg.DB)
			if _, err := advisory.Watch(ctx, conn2, keys.next(), advisory.WatchConfig{}); err == nil {
				t.Fatal("Watch of a lock not held succeeded")
			}
		})

		t.Run("LostOnTerminate", func(t *testing.T) {
			key := keys.next()
			const hb = 100 * time.Millisecond
			rec := &recorder{key: key}
			l, err := advisory.Acquire(ctx, tg.DB, key, advisory.Heartbeat(hb), advisory.WithObserver(rec))
			if err != nil {
				t.Fatal(err)
			}
			pid := pgLeasePID(t, tg.DB, key)
			start := time.Now()
			pgtest.Exec(t, tg.DB, "SELECT pg_terminate_backend($1)", pid)
			select {
			case <-l.Done():
			case <-time.After(2*hb + 10*time.Second): // the bound, and a generous margin
				t.Fatalf("lease not lost %v after its backend was terminated", time.Since(start))
			}
			if !errors.Is(l.Err(), advisory.ErrLockLost) || !errors.Is(context.Cause(l.Context()), advisory.ErrLockLost) {
				t.Fatalf("Err = %v, Cause = %v; want ErrLockLost", l.Err(), context.Cause(l.Context()))
			}
			if err := l.Release(ctx); !errors.Is(err, advisory.ErrLockLost) {
				t.Fatalf("Release after loss = %v; want ErrLockLost", err)
			}
			// The observer hears of the loss right after Done closes.
			pgtest.Await(t, "the observer to hear of the loss", func() (bool, error) {
				rec.mu.Lock()
				defer rec.mu.Unlock()
				return len(rec.losses) > 0, nil
			})
			rec.mu.Lock()
			if len(rec.acquires) != 1 || len(rec.losses) != 1 || rec.losses[0].Cause == nil {
				t.Errorf("observed %d acquisitions and losses %+v; want one of each, with a cause", len(rec.acquires), rec.losses)
			}
			rec.mu.Unlock()
			pgtest.AwaitFree(t, tg.DB, key)
		})

		t.Run("ScopeHeartbeatCancelsFn", func(t *testing.T) {
			key := keys.next()
			err := advisory.WithSessionLock(ctx, tg.DB, key, func(ctx context.Context, conn *sql.Conn) error {
				pgtest.Exec(t, tg.DB, "SELECT pg_terminate_backend($1)", pgtest.PID(t, conn))
				select {
				case <-ctx.Done():
					return nil // fn stops and reports nothing wrong
				case <-time.After(10 * time.Second):
					t.Error("fn's context not cancelled after the loss")
					return nil
				}
			}, advisory.Heartbeat(200*time.Millisecond))
			if !errors.Is(err, advisory.ErrLockLost) {
				t.Fatalf("got %v; want ErrLockLost", err)
			}
		})
	})
}
