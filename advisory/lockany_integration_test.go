package advisory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// Integration tests of the calls that take any of several keys, and of
// CancelWaiters (lockany.go, cancelwaiters.go), on every server and
// driver, for bigint keys and for pairs.

// TestLockAnyIntegration runs them, one subtest a theme.
func TestLockAnyIntegration(t *testing.T) {
	t.Run("TryTakesFirstFree", testTryLockAnyFirstFree)
	t.Run("WaitTakesFreedKey", testLockAnyWithinFreed)
	t.Run("WaitRunsOut", testLockAnyWithinRunsOut)
	t.Run("CancelWaitersWakes", testCancelWaitersWakes)
}

// anyKeySets returns three fresh keys of each key space.
func anyKeySets() map[string][]advisory.Key {
	keys := newPGKeys()
	return map[string][]advisory.Key{
		"Bigints": {keys.next(), keys.next(), keys.next()},
		"Pairs":   {keys.nextPair(), keys.nextPair(), keys.nextPair()},
	}
}

func testTryLockAnyFirstFree(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		for name, keys := range anyKeySets() {
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				holder, conn, third := pgtest.Conn(t, tg.DB), pgtest.Conn(t, tg.DB), pgtest.Conn(t, tg.DB)
				if err := advisory.Lock(ctx, holder, keys[0]); err != nil {
					t.Fatal(err)
				}
				k, ok, err := advisory.TryLockAny(ctx, conn, keys...)
				if err != nil || !ok || k != keys[1] {
					t.Fatalf("TryLockAny = %v, %t, %v; want %v, true, nil", k, ok, err, keys[1])
				}
				pid := pgtest.PID(t, conn)
				if locks := pgLocksOfPID(t, tg.DB, pid); len(locks) != 1 {
					t.Errorf("the session holds %v; want %v alone", locks, keys[1])
				}
				pgRequireHolds(t, tg.DB, pid, keys[1], false)
				if err := advisory.Lock(ctx, holder, keys[2]); err != nil {
					t.Fatal(err)
				}
				k, ok, err = advisory.TryLockAny(ctx, third, keys...)
				if err != nil || ok {
					t.Fatalf("TryLockAny with every key taken = %v, %t, %v; want false, nil", k, ok, err)
				}
				pgRequireNoLocks(t, tg.DB, pgtest.PID(t, third))
				if err := advisory.Unlock(ctx, conn, keys[1]); err != nil {
					t.Errorf("Unlock of the key taken: %v", err)
				}
				if err := advisory.UnlockAll(ctx, holder); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
}

func testLockAnyWithinFreed(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		for name, keys := range anyKeySets() {
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				holder, waiter := pgtest.Conn(t, tg.DB), pgtest.Conn(t, tg.DB)
				if err := advisory.LockKeys(ctx, holder, keys...); err != nil {
					t.Fatal(err)
				}
				pid := pgtest.PID(t, waiter)
				before := pgShow(t, waiter, "lock_timeout")
				type result struct {
					k   advisory.Key
					err error
				}
				done := make(chan result, 1)
				go func() {
					k, err := advisory.LockAnyWithin(ctx, waiter, time.Second, keys[2], keys[0], keys[1])
					done <- result{k, err}
				}()
				pgWaitWaiting(t, tg.DB, pid, keys[2])
				if err := advisory.Unlock(ctx, holder, keys[2]); err != nil {
					t.Fatal(err)
				}
				r := <-done
				if r.err != nil || r.k != keys[2] {
					t.Fatalf("LockAnyWithin = %v, %v; want %v (a wait can also run out under load)", r.k, r.err, keys[2])
				}
				pgRequireHolds(t, tg.DB, pid, keys[2], false)
				if locks := pgLocksOfPID(t, tg.DB, pid); len(locks) != 1 {
					t.Errorf("the waiter holds %v; want %v alone", locks, keys[2])
				}
				// The session's lock_timeout is its own again.
				if got := pgShow(t, waiter, "lock_timeout"); got != before {
					t.Errorf("lock_timeout after the wait = %q; want %q", got, before)
				}
				if err := advisory.UnlockAll(ctx, holder); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
}

func testLockAnyWithinRunsOut(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		for name, keys := range anyKeySets() {
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				holder, waiter := pgtest.Conn(t, tg.DB), pgtest.Conn(t, tg.DB)
				if err := advisory.LockKeys(ctx, holder, keys...); err != nil {
					t.Fatal(err)
				}
				pid := pgtest.PID(t, waiter)
				before := pgShow(t, waiter, "lock_timeout")
				// What an earlier wait may have left: released first.
				if err := advisory.Lock(ctx, waiter, newPGKeys().next()); err != nil {
					t.Fatal(err)
				}
				k, err := advisory.LockAnyWithin(ctx, waiter, 50*time.Millisecond, keys...)
				if !errors.Is(err, advisory.ErrLockTimeout) || pgSQLState(err) != "55P03" {
					t.Fatalf("LockAnyWithin with every key taken = %v, %v; want ErrLockTimeout, SQLSTATE 55P03", k, err)
				}
				// The session stays open, holding nothing, its
				// lock_timeout its own.
				pgRequireNoLocks(t, tg.DB, pid)
				if got := pgShow(t, waiter, "lock_timeout"); got != before {
					t.Errorf("lock_timeout after the wait = %q; want %q", got, before)
				}
				if err := advisory.UnlockAll(ctx, holder); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
}

func testCancelWaitersWakes(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		keys := newPGKeys()
		for name, first := range map[string]advisory.Key{"Bigints": keys.next(), "Pairs": keys.nextPair()} {
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				// Three consecutive keys from first, as CancelWaiters
				// counts them.
				var run [3]advisory.Key
				for i := range run {
					if v, ok := first.Int64(); ok {
						run[i] = advisory.Int64Key(v + int64(i))
					} else {
						a, b, _ := first.Pair()
						run[i] = advisory.PairKey(a, b+int32(i))
					}
					keys.next() // keep later keys of the test apart
				}
				holder, waiter, waker := pgtest.Conn(t, tg.DB), pgtest.Conn(t, tg.DB), pgtest.Conn(t, tg.DB)
				if err := advisory.LockKeys(ctx, holder, run[:]...); err != nil {
					t.Fatal(err)
				}
				pid := pgtest.PID(t, waiter)
				// Nobody waits yet: nothing to wake.
				if n, err := advisory.CancelWaiters(ctx, waker, first, 3); n != 0 || err != nil {
					t.Fatalf("CancelWaiters with no waiter = %d, %v; want 0, nil", n, err)
				}
				type result struct {
					k     advisory.Key
					err   error
					woken int
				}
				done := make(chan result, 1)
				go func() {
					// The waiter waits for run[1], and tries every key
					// again when its wait runs out or is woken.
					woken := 0
					for {
						k, err := advisory.LockAnyWithin(ctx, waiter, time.Second, run[1], run[0], run[2])
						if errors.Is(err, advisory.ErrLockTimeout) {
							if pgSQLState(err) == "57014" {
								woken++
							}
							continue
						}
						done <- result{k, err, woken}
						return
					}
				}()
				pgWaitWaiting(t, tg.DB, pid, run[1])
				// A key that nobody waits for frees: the waiter does
				// not get it unless woken.
				if err := advisory.Unlock(ctx, holder, run[0]); err != nil {
					t.Fatal(err)
				}
				signalled := 0
				for signalled == 0 {
					n, err := advisory.CancelWaiters(ctx, waker, first, 3)
					if err != nil {
						t.Fatal(err)
					}
					signalled = n
					if n == 0 {
						// The waiter was between two statements, or
						// had already found the key: look again.
						select {
						case r := <-done:
							done <- r
							signalled = -1
						case <-time.After(10 * time.Millisecond):
						}
					}
				}
				r := <-done
				if r.err != nil || r.k != run[0] {
					t.Fatalf("LockAnyWithin = %v, %v; want %v", r.k, r.err, run[0])
				}
				if signalled > 1 {
					t.Errorf("CancelWaiters signalled %d sessions; want the one waiter", signalled)
				}
				if signalled == 1 && r.woken == 0 {
					t.Errorf("CancelWaiters signalled the waiter, whose wait was not cancelled")
				}
				// The waiter holds run[0] once, and nothing else.
				if locks := pgLocksOfPID(t, tg.DB, pid); len(locks) != 1 {
					t.Errorf("the waiter holds %v; want %v alone", locks, run[0])
				}
				if err := advisory.Unlock(ctx, waiter, run[0]); err != nil {
					t.Errorf("Unlock: %v", err)
				}
				pgRequireNoLocks(t, tg.DB, pid)
				if err := advisory.UnlockAll(ctx, holder); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
}
