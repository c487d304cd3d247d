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

// Integration tests of leases (lease.go): on a shared server,
// acquisition, release, fencing tokens, and loss when the holder's backend
// is terminated (Basics), and what a lease costs on the wire (RoundTrips).
// The larger themes have files of their own: lease_chaos_, lease_loss_
// and lease_pooler_integration_test.go.

// TestLeaseIntegration runs the integration tests of leases, one subtest
// a theme, each on every server and driver.
func TestLeaseIntegration(t *testing.T) {
	t.Run("Basics", testLeaseBasics)
	t.Run("RoundTrips", testLeaseRoundTrips)
	t.Run("Chaos", testLeaseChaos)
	t.Run("ChaosRestartPause", testLeaseChaosRestartPause)
	t.Run("LossTerminate", testLeaseLossTerminate)
	t.Run("LossRestartPause", testLeaseLossRestartPause)
	t.Run("LossIdleTimeout", testLeaseLossIdleTimeout)
	t.Run("Pooler", testLeasePooler)
	t.Run("PoolerNoAnswer", testLeasePoolerNoAnswer)
	t.Run("PoolerReset", testLeasePoolerReset)
	t.Run("ReclaimAt", testLeaseReclaimAt)
}

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

func testLeaseBasics(t *testing.T) {
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

// testLeaseRoundTrips proves through a counting proxy what a
// lease costs on the wire, alone ([advisory.Acquire]) and multiplexed
// ([advisory.Locker]): per acquisition, per release, and per heartbeat.
func testLeaseRoundTrips(t *testing.T) {
	// The heartbeat of the leases whose heartbeats are counted; the
	// others beat too rarely to fall inside a measured call.
	const hb = 200 * time.Millisecond
	// The heartbeats counted.
	const beats = 10
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		keys := newPGKeys()
		p := tg.Server.Proxy(t)
		srv := *tg.Server
		srv.DSN = p.DSN()
		db := srv.Open(t, tg.Driver)
		db.SetMaxOpenConns(1)

		// count runs f and returns the round trips it took.
		count := func(t *testing.T, f func() error) int64 {
			t.Helper()
			p.Reset()
			if err := f(); err != nil {
				t.Fatal(err)
			}
			return p.Flights()
		}
		// checkBeats counts the round trips of the next n heartbeats of
		// l, with nothing else under way, however late a loaded machine
		// makes them: it counts the heartbeats that l made, not
		// intervals of time. It starts right after a heartbeat, so that
		// the next, and any heartbeat pgx's first preparation made
		// dearer, falls outside the count, and stops once n more have
		// ended. A heartbeat still in flight at either end may have its
		// round trip on the other side, so one a heartbeat is n±1; two
		// would be at least 2n-2.
		checkBeats := func(t *testing.T, what string, l *advisory.Lease, n int64) {
			t.Helper()
			before := advisory.Beats(l)
			pgtest.Await(t, what+": a heartbeat", func() (bool, error) { return advisory.Beats(l) > before, nil })
			p.Reset()
			start := advisory.Beats(l)
			pgtest.Await(t, fmt.Sprintf("%s: %d heartbeats", what, n), func() (bool, error) {
				return advisory.Beats(l)-start >= n, nil
			})
			got, made := p.Flights(), advisory.Beats(l)-start
			if got < made-1 || got > made+1 {
				t.Errorf("%s: %d round trips in %d heartbeats; want %d±1, one a heartbeat", what, got, made, made)
			}
		}
		check := func(t *testing.T, what string, got, want int64) {
			t.Helper()
			if got != want {
				t.Errorf("%s: %d round trips; want %d", what, got, want)
			}
		}

		t.Run("Acquire", func(t *testing.T) {
			// Warm: the pool's connection exists and has carried a
			// lease.
			l, err := advisory.Acquire(ctx, db, keys.next(), advisory.Heartbeat(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			// The lock, and the statement that confirms it. On pgx
			// both carry the key as a parameter, and the warm-up
			// prepared them: a key new to the connection costs what
			// any other does.
			k := keys.next()
			// pgx's session reset pings a pooled connection that has
			// not been taken from the pool for over a second, a round
			// trip that is the driver's: take the connection once just
			// before each measured Acquire.
			ping := func() {
				if err := db.PingContext(ctx); err != nil {
					t.Fatal(err)
				}
			}
			ping()
			check(t, "Acquire of a key new to the connection", count(t, func() (err error) {
				l, err = advisory.Acquire(ctx, db, k, advisory.Heartbeat(time.Hour))
				return err
			}), 2)
			check(t, "Release", count(t, func() error { return l.Release(ctx) }), 1)
			ping()
			check(t, "Acquire of the same key again", count(t, func() (err error) {
				l, err = advisory.Acquire(ctx, db, k, advisory.Heartbeat(time.Hour))
				return err
			}), 2)
			check(t, "Release", count(t, func() error { return l.Release(ctx) }), 1)
			l, err = advisory.Acquire(ctx, db, keys.next(), advisory.Heartbeat(hb))
			if err != nil {
				t.Fatal(err)
			}
			checkBeats(t, "a lease's heartbeats", l, beats)
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})

		t.Run("Locker", func(t *testing.T) {
			lk := newLocker(t, db, advisory.LockerConfig{MaxConns: 1, Heartbeat: time.Hour})
			// Warm: the Locker's connection is open.
			first, err := lk.Acquire(ctx, keys.next())
			if err != nil {
				t.Fatal(err)
			}
			var ls []*advisory.Lease
			for _, opts := range [][]advisory.LockOption{nil, {advisory.Try()}, {advisory.Shared()}, {advisory.Wait(time.Second)}} {
				check(t, "Locker.Acquire", count(t, func() error {
					l, err := lk.Acquire(ctx, keys.next(), as[advisory.LockerOption](opts)...)
					ls = append(ls, l)
					return err
				}), 1)
			}
			for _, l := range ls {
				check(t, "Release", count(t, func() error { return l.Release(ctx) }), 1)
			}
			// With a fencing token, the try returns a row, which pgx
			// sends prepared: the key is a parameter, so the try before
			// prepared it, and a new key costs one round trip.
			want := int64(1)
			key := keys.next()
			if _, err := lk.Acquire(ctx, keys.next(), advisory.Fencing()); err != nil {
				t.Fatal(err) // creates the sequence, if need be, and prepares the try
			}
			check(t, "Locker.Acquire with Fencing", count(t, func() error {
				_, err := lk.Acquire(ctx, key, advisory.Fencing())
				return err
			}), want)
			if err := first.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if err := lk.Close(ctx); err != nil {
				t.Fatal(err)
			}

			// One heartbeat proves all the leases on a connection. The
			// first is prepared by pgx: count from the second.
			lk = newLocker(t, db, advisory.LockerConfig{MaxConns: 1, Heartbeat: hb})
			var l *advisory.Lease
			for range 5 {
				if l, err = lk.Acquire(ctx, keys.next()); err != nil {
					t.Fatal(err)
				}
			}
			checkBeats(t, "the heartbeats of 5 leases on a connection", l, beats)
		})
	})
}
