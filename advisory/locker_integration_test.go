package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// Integration tests of the multiplexed Locker (locker.go): what each
// option does, where a Locker waits, and what Close leaves (Basics), and
// ten thousand keys on four connections. Its connections' loss is in
// locker_loss_integration_test.go.

// TestLockerIntegration runs the integration tests of the Locker, one
// subtest a theme, each on every server and driver.
func TestLockerIntegration(t *testing.T) {
	t.Run("Basics", testLockerBasics)
	t.Run("TenThousandKeys", testLockerTenThousandKeys)
	t.Run("Loss", testLockerLoss)
	t.Run("Chaos", testLockerChaos)
}

// newLocker returns a Locker on db, closed at t's end.
func newLocker(t *testing.T, db *sql.DB, cfg ...advisory.LockerConfig) *advisory.Locker {
	t.Helper()
	var c advisory.LockerConfig
	if len(cfg) > 0 {
		c = cfg[0]
	}
	lk, err := advisory.NewLocker(db, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lk.Close(context.Background()) })
	return lk
}

// pgBackendsOfApp returns how many backends of app hold advisory locks,
// and how many locks they hold.
func pgBackendsOfApp(t *testing.T, obs *sql.DB, app string) (backends, locks int) {
	t.Helper()
	err := obs.QueryRowContext(context.Background(), `SELECT count(DISTINCT l.pid), count(*) FROM pg_locks l
		JOIN pg_stat_activity a USING (pid) WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = $1`, app).Scan(&backends, &locks)
	if err != nil {
		t.Fatal(err)
	}
	return backends, locks
}

func testLockerBasics(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		keys := newPGKeys()

		t.Run("AcquireRelease", func(t *testing.T) {
			t.Parallel()
			// Each heartbeat must be answered within the interval, or
			// the lease is lost: an interval a loaded machine answers,
			// beside this package's 10,000-key runs (500 ms was not).
			lk := newLocker(t, tg.DB, advisory.LockerConfig{Heartbeat: 2 * time.Second})
			key := keys.nextPair()
			l, err := lk.Acquire(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if l.Key() != key || l.Err() != nil || l.Token() != 0 {
				t.Fatalf("Key %v, Err %v, Token %d", l.Key(), l.Err(), l.Token())
			}
			other := pgtest.Conn(t, tg.DB)
			if ok, err := advisory.TryLock(ctx, other, key); ok || err != nil {
				t.Fatalf("TryLock while leased = %v, %v (lease Err %v)", ok, err, l.Err())
			}
			awaitBeats(t, 2, l)
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
			if ok, err := advisory.TryLock(ctx, other, key); !ok || err != nil {
				t.Fatalf("TryLock after Release = %v, %v", ok, err)
			}
		})

		t.Run("TryBusy", func(t *testing.T) {
			t.Parallel()
			lk := newLocker(t, tg.DB)
			key := keys.next()
			holder := pgtest.Conn(t, tg.DB)
			if err := advisory.Lock(ctx, holder, key); err != nil {
				t.Fatal(err)
			}
			if _, err := lk.Acquire(ctx, key, advisory.Try()); !errors.Is(err, advisory.ErrNotAcquired) {
				t.Fatalf("Try on a key another session holds: %v; want ErrNotAcquired", err)
			}
			if _, err := lk.Acquire(ctx, key, advisory.Wait(50*time.Millisecond)); !errors.Is(err, advisory.ErrLockTimeout) {
				t.Fatalf("Timeout on a key another session holds: %v; want ErrLockTimeout", err)
			}
			cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			if _, err := lk.Acquire(cctx, key); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("wait past ctx's deadline: %v; want context.DeadlineExceeded", err)
			}
		})

		t.Run("OwnKeys", func(t *testing.T) {
			t.Parallel()
			// One session would let a key stack: the Locker arbitrates
			// its own keys, on any connection.
			lk := newLocker(t, tg.DB, advisory.LockerConfig{MaxConns: 1})
			key := keys.next()
			l, err := lk.Acquire(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := lk.Acquire(ctx, key, advisory.Try()); !errors.Is(err, advisory.ErrNotAcquired) {
				t.Fatalf("Try on the Locker's own key: %v; want ErrNotAcquired", err)
			}
			if _, err := lk.Acquire(ctx, key, advisory.Wait(20*time.Millisecond)); !errors.Is(err, advisory.ErrLockTimeout) {
				t.Fatalf("Timeout on the Locker's own key: %v; want ErrLockTimeout", err)
			}
			got := make(chan error, 1)
			go func() {
				l2, err := lk.Acquire(ctx, key)
				if err == nil {
					err = l2.Release(ctx)
				}
				got <- err
			}()
			time.Sleep(50 * time.Millisecond)
			select {
			case err := <-got:
				t.Fatalf("second Acquire returned %v while the first lease held the key", err)
			default:
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatalf("second Acquire after the first lease's release: %v", err)
			}
		})

		t.Run("WaitForAnotherSession", func(t *testing.T) {
			t.Parallel()
			lk := newLocker(t, tg.DB, advisory.LockerConfig{MaxConns: 1})
			key := keys.next()
			holder := pgtest.Conn(t, tg.DB)
			if err := advisory.Lock(ctx, holder, key); err != nil {
				t.Fatal(err)
			}
			// Another lease on the Locker's one connection, which the
			// wait must not stall.
			other, err := lk.Acquire(ctx, keys.next())
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 1)
			var l *advisory.Lease
			go func() {
				var err error
				l, err = lk.Acquire(ctx, key)
				got <- err
			}()
			pgtest.AwaitWaiting(t, tg.DB, key)
			if err := other.Release(ctx); err != nil {
				t.Fatalf("release during another acquisition's wait: %v", err)
			}
			if err := advisory.Unlock(ctx, holder, key); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatalf("Acquire after the holder let go: %v", err)
			}
			if pid := pgLeasePID(t, tg.DB, key); pid == pgtest.PID(t, holder) {
				t.Fatal("the holder still holds the key")
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})

		t.Run("Shared", func(t *testing.T) {
			t.Parallel()
			lk := newLocker(t, tg.DB, advisory.LockerConfig{MaxConns: 2})
			key := keys.next()
			var ls []*advisory.Lease
			for range 3 {
				l, err := lk.Acquire(ctx, key, advisory.Shared(), advisory.Try())
				if err != nil {
					t.Fatal(err)
				}
				ls = append(ls, l)
			}
			if _, err := lk.Acquire(ctx, key, advisory.Try()); !errors.Is(err, advisory.ErrNotAcquired) {
				t.Fatalf("exclusive Try while shared leases hold: %v; want ErrNotAcquired", err)
			}
			other := pgtest.Conn(t, tg.DB)
			if ok, err := advisory.TryLock(ctx, other, key); ok || err != nil {
				t.Fatalf("another session's exclusive TryLock = %v, %v", ok, err)
			}
			for _, l := range ls {
				if err := l.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if ok, err := advisory.TryLock(ctx, other, key); !ok || err != nil {
				t.Fatalf("TryLock after the shared leases' release = %v, %v", ok, err)
			}
		})

		t.Run("Fencing", func(t *testing.T) {
			t.Parallel()
			lk := newLocker(t, tg.DB)
			key := keys.next()
			var last int64
			for range 5 {
				l, err := lk.Acquire(ctx, key, advisory.Fencing())
				if err != nil {
					t.Fatal(err)
				}
				if l.Token() <= last {
					t.Fatalf("token %d after %d", l.Token(), last)
				}
				last = l.Token()
				if err := l.Release(ctx); err != nil {
					t.Fatal(err)
				}
			}
			// A single lease on the same key continues the sequence.
			l, err := advisory.Acquire(ctx, tg.DB, key, advisory.Fencing())
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release(ctx)
			if l.Token() <= last {
				t.Fatalf("Acquire's token %d after the Locker's %d", l.Token(), last)
			}
		})

		t.Run("ConnectionBound", func(t *testing.T) {
			t.Parallel()
			app := pgtest.UniqueName("advisory-")
			db := pgtest.OpenApp(t, tg, app)
			lk := newLocker(t, db, advisory.LockerConfig{MaxConns: 3})
			var wg sync.WaitGroup
			ls := make([]*advisory.Lease, 200)
			for i := range ls {
				wg.Go(func() {
					l, err := lk.Acquire(ctx, keys.next())
					if err != nil {
						t.Error(err)
						return
					}
					ls[i] = l
				})
			}
			wg.Wait()
			// A connection whose heartbeat a loaded machine did not
			// answer in time is lost, with its leases and their locks:
			// what must hold is that the leases still held are on the
			// server, on at most 3 backends.
			held := func() (n int) {
				for _, l := range ls {
					if l != nil && l.Err() == nil {
						n++
					}
				}
				return n
			}
			for {
				before := held()
				backends, locks := pgBackendsOfApp(t, tg.DB, app)
				if held() != before {
					continue // a lease was lost while pg_locks was read
				}
				if backends > 3 || locks != before {
					t.Fatalf("%d locks on %d backends; want %d (the leases held) on at most 3", locks, backends, before)
				}
				if before < len(ls) {
					t.Logf("%d of %d leases lost to a heartbeat the machine did not answer in time", len(ls)-before, len(ls))
				}
				break
			}
			for _, l := range ls {
				if l != nil {
					err := l.Release(ctx)
					if err != nil && !(errors.Is(err, advisory.ErrLockLost) && errors.Is(l.Err(), advisory.ErrLockLost)) {
						t.Fatal(err)
					}
				}
			}
			pgRequireNoAppLocks(t, tg.DB, app)
		})

		t.Run("Close", func(t *testing.T) {
			t.Parallel()
			app := pgtest.UniqueName("advisory-")
			db := pgtest.OpenApp(t, tg, app)
			lk, err := advisory.NewLocker(db, advisory.LockerConfig{MaxConns: 2})
			if err != nil {
				t.Fatal(err)
			}
			var ls []*advisory.Lease
			for range 10 {
				l, err := lk.Acquire(ctx, keys.next())
				if err != nil {
					t.Fatal(err)
				}
				ls = append(ls, l)
			}
			if err := lk.Close(ctx); err != nil {
				t.Fatal(err)
			}
			for _, l := range ls {
				<-l.Done()
				if !errors.Is(l.Err(), context.Canceled) {
					t.Fatalf("Err after Close = %v; want context.Canceled", l.Err())
				}
				if err := l.Release(ctx); err != nil {
					t.Fatalf("Release after Close = %v; want nil", err)
				}
			}
			if _, err := lk.Acquire(ctx, keys.next()); !errors.Is(err, advisory.ErrLockerClosed) {
				t.Fatalf("Acquire after Close: %v; want ErrLockerClosed", err)
			}
			pgRequireNoAppLocks(t, tg.DB, app)
		})

		t.Run("CloseEndsWaits", func(t *testing.T) {
			t.Parallel()
			lk, err := advisory.NewLocker(tg.DB, advisory.LockerConfig{})
			if err != nil {
				t.Fatal(err)
			}
			// One acquisition waits in the server for another
			// session's key, one in the process for the Locker's own.
			busy, own := keys.next(), keys.next()
			holder := pgtest.Conn(t, tg.DB)
			if err := advisory.Lock(ctx, holder, busy); err != nil {
				t.Fatal(err)
			}
			if _, err := lk.Acquire(ctx, own); err != nil {
				t.Fatal(err)
			}
			waits := make(chan error, 2)
			for _, k := range []advisory.Key{busy, own} {
				go func() {
					_, err := lk.Acquire(ctx, k)
					waits <- err
				}()
			}
			pgtest.AwaitWaiting(t, tg.DB, busy)
			if err := lk.Close(ctx); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				select {
				case err := <-waits:
					if !errors.Is(err, advisory.ErrLockerClosed) {
						t.Errorf("a wait that Close ended: %v; want ErrLockerClosed", err)
					}
				case <-time.After(pgtest.PollTimeout):
					t.Fatal("Close did not end a wait")
				}
			}
			if err := advisory.Unlock(ctx, holder, busy); err != nil {
				t.Fatal(err)
			}
			pgtest.AwaitFree(t, tg.DB, own)
		})

		t.Run("Options", func(t *testing.T) {
			t.Parallel()
			if _, err := advisory.NewLocker(nil, advisory.LockerConfig{}); err == nil {
				t.Fatal("NewLocker(nil) succeeded")
			}
			for _, bad := range []advisory.LockerConfig{{MaxConns: -1}, {Heartbeat: time.Microsecond}, {Heartbeat: -time.Second}} {
				if _, err := advisory.NewLocker(tg.DB, bad); !errors.Is(err, advisory.ErrBadOption) {
					t.Errorf("NewLocker(%+v): %v, want ErrBadOption", bad, err)
				}
			}
			lk := newLocker(t, tg.DB)
			for _, bad := range [][]advisory.LockerOption{{advisory.Wait(-time.Second)}, {advisory.WaitSlice(time.Microsecond)}} {
				if _, err := lk.Acquire(ctx, keys.next(), bad...); !errors.Is(err, advisory.ErrBadOption) {
					t.Errorf("Acquire with a bad option: %v, want ErrBadOption", err)
				}
			}
		})
	})
}

// manyKeys is how many keys one process holds on at most manyConns
// connections.
const (
	manyKeys  = 10_000
	manyConns = 4
)

func testLockerTenThousandKeys(t *testing.T) {
	// Two drivers at once hold 20,000 keys on each server: its lock
	// table needs room, which a dedicated server gives.
	for _, s := range pgtest.StartServer(t, "-c", "max_locks_per_transaction=256") {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			for _, driver := range pgtest.Drivers {
				t.Run(driver, func(t *testing.T) {
					t.Parallel()
					ctx := context.Background()
					obs := s.Open(t, pgtest.DriverPQ)
					app := pgtest.UniqueName("advisory-")
					tg := pgtest.Target{Server: s, Driver: driver, DB: obs}
					db := pgtest.OpenApp(t, tg, app)
					// Each heartbeat reads pg_locks, which copies the
					// server's whole lock table: 20,000 locks and more.
					// On a machine loaded by the rest of the suite that
					// has taken over a second, the bound a 1 s interval
					// sets for the answer.
					lk := newLocker(t, db, advisory.LockerConfig{MaxConns: manyConns, Heartbeat: 3 * time.Second})
					gen := newPGKeys()
					ls := make([]*advisory.Lease, manyKeys)
					var next atomic.Int64
					start := time.Now()
					var wg sync.WaitGroup
					for range 32 {
						wg.Go(func() {
							for i := next.Add(1) - 1; i < manyKeys; i = next.Add(1) - 1 {
								k := gen.next()
								if i%2 == 1 {
									k = gen.nextPair()
								}
								l, err := lk.Acquire(ctx, k, advisory.Try())
								if err != nil {
									t.Errorf("key %d of %d: %v", i, manyKeys, err)
									return
								}
								ls[i] = l
							}
						})
					}
					wg.Wait()
					if t.Failed() {
						return
					}
					took := time.Since(start)
					for _, l := range ls {
						if err := l.Err(); err != nil {
							t.Fatalf("lease on %s lost while taking the others: %v", l.Key(), err)
						}
					}
					backends, locks := pgBackendsOfApp(t, obs, app)
					if backends > manyConns || locks != manyKeys {
						t.Fatalf("%d locks on %d backends; want %d on at most %d", locks, backends, manyKeys, manyConns)
					}
					// A few heartbeats, each proving 2,500 leases.
					awaitBeats(t, 2, ls...)
					for _, l := range ls {
						if err := l.Err(); err != nil {
							t.Fatalf("lease on %s lost while held: %v", l.Key(), err)
						}
					}
					// Half are released one by one, the rest by Close.
					for _, l := range ls[:manyKeys/2] {
						if err := l.Release(ctx); err != nil {
							t.Fatal(err)
						}
					}
					if err := lk.Close(ctx); err != nil {
						t.Fatal(err)
					}
					pgRequireNoAppLocks(t, obs, app)
					t.Logf("%d keys held on %d backends, taken in %v by 32 goroutines", locks, backends, took.Round(time.Millisecond))
				})
			}
		})
	}
}
