package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// Integration tests of the session lock functions on *sql.Conn
// (session.go). The ghost-lock races are in
// session_ghost_integration_test.go, what the drivers and pools do with a
// session in session_drivers_integration_test.go.

// TestSessionIntegration runs the integration tests of the session lock
// functions, one subtest a theme, each on every server and driver.
func TestSessionIntegration(t *testing.T) {
	t.Run("Stacking", testSessionStacking)
	t.Run("NotHeld", testSessionNotHeld)
	t.Run("UnlockAll", testSessionUnlockAll)
	t.Run("TryContention", testSessionTryContention)
	t.Run("SharedExclusive", testSessionSharedExclusive)
	t.Run("LockKeysNoDeadlock", testSessionLockKeysNoDeadlock)
	t.Run("LockKeysMany", testSessionLockKeysMany)
	t.Run("GhostCancelGrantRace", testSessionGhostCancelGrantRace)
	t.Run("GhostDeadlineGrantRace", testSessionGhostDeadlineGrantRace)
	t.Run("CancelledWaitEndsOnServer", testSessionCancelledWaitEndsOnServer)
	t.Run("PgxPoolDiscard", testSessionPgxPoolDiscard)
	t.Run("PooledConnKeepsLock", testSessionPooledConnKeepsLock)
	t.Run("WaitInBlock", testSessionWaitInBlock)
}

func testSessionStacking(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		keys := newPGKeys()
		tests := []struct {
			name   string
			key    advisory.Key
			shared bool
		}{
			{"Exclusive", keys.next(), false},
			{"ExclusivePair", keys.nextPair(), false},
			{"Shared", keys.next(), true},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				ctx := context.Background()
				lock, unlock := advisory.Lock, advisory.Unlock
				if tt.shared {
					lock, unlock = advisory.LockShared, advisory.UnlockShared
				}
				conn, other := pgtest.Conn(t, tg.DB), pgtest.Conn(t, tg.DB)
				pid := pgtest.PID(t, conn)

				for i := range 2 {
					if err := lock(ctx, conn, tt.key); err != nil {
						t.Fatalf("lock #%d: %v", i+1, err)
					}
				}
				for i := range 2 {
					// Still held: another session cannot take it exclusively.
					if ok, err := advisory.TryLock(ctx, other, tt.key); err != nil || ok {
						t.Fatalf("after %d of 2 unlocks, another session's TryLock = %v, %v; want false, nil", i, ok, err)
					}
					pgRequireHolds(t, tg.DB, pid, tt.key, tt.shared)
					if err := unlock(ctx, conn, tt.key); err != nil {
						t.Fatalf("unlock #%d of a key locked twice: %v", i+1, err)
					}
				}
				pgRequireNoLocks(t, tg.DB, pid)

				// A third unlock finds nothing held: ErrNotHeld, and the
				// session is closed rather than trusted.
				err := unlock(ctx, conn, tt.key)
				if !errors.Is(err, advisory.ErrNotHeld) {
					t.Fatalf("third unlock = %v; want ErrNotHeld", err)
				}
				pgRequireDiscarded(t, conn)
				pgWaitGone(t, tg.DB, pid)

				if ok, err := advisory.TryLock(ctx, other, tt.key); err != nil || !ok {
					t.Fatalf("TryLock after two unlocks = %v, %v; want true", ok, err)
				}
				if err := advisory.Unlock(ctx, other, tt.key); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
}

func testSessionNotHeld(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		keys := newPGKeys()

		t.Run("NeverLocked", func(t *testing.T) {
			for _, unlock := range []struct {
				name string
				f    func(context.Context, *sql.Conn, advisory.Key) error
			}{
				{"Unlock", advisory.Unlock},
				{"UnlockShared", advisory.UnlockShared},
				{"UnlockKeys", func(ctx context.Context, c *sql.Conn, k advisory.Key) error { return advisory.UnlockKeys(ctx, c, k) }},
			} {
				t.Run(unlock.name, func(t *testing.T) {
					conn := pgtest.Conn(t, tg.DB)
					pid := pgtest.PID(t, conn)
					err := unlock.f(ctx, conn, keys.next())
					if !errors.Is(err, advisory.ErrNotHeld) {
						t.Fatalf("%s of a key never locked = %v; want ErrNotHeld", unlock.name, err)
					}
					pgRequireDiscarded(t, conn)
					pgWaitGone(t, tg.DB, pid)
				})
			}
		})

		t.Run("WrongMode", func(t *testing.T) {
			// An exclusive lock is not released by UnlockShared: the
			// server says false, and the session, with its exclusive
			// lock, is closed.
			k := keys.next()
			conn := pgtest.Conn(t, tg.DB)
			pid := pgtest.PID(t, conn)
			if err := advisory.Lock(ctx, conn, k); err != nil {
				t.Fatal(err)
			}
			if err := advisory.UnlockShared(ctx, conn, k); !errors.Is(err, advisory.ErrNotHeld) {
				t.Fatalf("UnlockShared of an exclusive lock = %v; want ErrNotHeld", err)
			}
			pgRequireDiscarded(t, conn)
			pgWaitGone(t, tg.DB, pid)
			pgRequireFree(t, tg.DB, k)
		})

		t.Run("UnlockKeysPartlyHeld", func(t *testing.T) {
			// One key held, one not: the held one is released with the
			// session, which is closed.
			held, notHeld := keys.next(), keys.nextPair()
			conn := pgtest.Conn(t, tg.DB)
			pid := pgtest.PID(t, conn)
			if err := advisory.Lock(ctx, conn, held); err != nil {
				t.Fatal(err)
			}
			err := advisory.UnlockKeys(ctx, conn, notHeld, held)
			if !errors.Is(err, advisory.ErrNotHeld) {
				t.Fatalf("UnlockKeys of one held and one free key = %v; want ErrNotHeld", err)
			}
			pgRequireDiscarded(t, conn)
			pgWaitGone(t, tg.DB, pid)
			pgRequireFree(t, tg.DB, held)
		})

		t.Run("UnlockAllHoldsNothing", func(t *testing.T) {
			// UnlockAll of nothing is not an error: it reports nothing.
			conn := pgtest.Conn(t, tg.DB)
			pid := pgtest.PID(t, conn)
			if err := advisory.UnlockAll(ctx, conn); err != nil {
				t.Fatalf("UnlockAll with nothing held: %v", err)
			}
			if got := pgtest.PID(t, conn); got != pid {
				t.Fatalf("session changed from %d to %d", pid, got)
			}
		})
	})
}

func testSessionUnlockAll(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		keys := newPGKeys()
		a, b, c := keys.next(), keys.nextPair(), keys.next()
		conn := pgtest.Conn(t, tg.DB)
		pid := pgtest.PID(t, conn)
		for _, step := range []func() error{
			func() error { return advisory.Lock(ctx, conn, a) },
			func() error { return advisory.Lock(ctx, conn, a) },
			func() error { return advisory.LockShared(ctx, conn, b) },
			func() error { return advisory.LockKeys(ctx, conn, c, a) },
		} {
			if err := step(); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(pgLocksOfPID(t, tg.DB, pid)); n != 3 {
			t.Fatalf("pg_locks shows %d advisory locks; want 3", n)
		}
		if err := advisory.UnlockAll(ctx, conn); err != nil {
			t.Fatal(err)
		}
		pgRequireNoLocks(t, tg.DB, pid)
		if got := pgtest.PID(t, conn); got != pid {
			t.Fatalf("UnlockAll changed the session from %d to %d", pid, got)
		}
	})
}

func testSessionTryContention(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		keys := newPGKeys()
		k := keys.next()
		holder := pgtest.Conn(t, tg.DB)
		if err := advisory.Lock(ctx, holder, k); err != nil {
			t.Fatal(err)
		}
		holderPID := pgtest.PID(t, holder)

		t.Run("Session", func(t *testing.T) {
			for _, try := range []struct {
				name string
				f    func(context.Context, *sql.Conn, advisory.Key) (bool, error)
			}{
				{"TryLock", advisory.TryLock},
				{"TryLockShared", advisory.TryLockShared},
			} {
				t.Run(try.name, func(t *testing.T) {
					conn := pgtest.Conn(t, tg.DB)
					pid := pgtest.PID(t, conn)
					ok, err := try.f(ctx, conn, k)
					if err != nil || ok {
						t.Fatalf("%s on a key held exclusively elsewhere = %v, %v; want false, nil", try.name, ok, err)
					}
					// Nothing was in doubt: the session is kept, holding
					// nothing, and the key is still the holder's alone.
					if got := pgtest.PID(t, conn); got != pid {
						t.Fatalf("session changed from %d to %d", pid, got)
					}
					pgRequireNoLocks(t, tg.DB, pid)
					if locks := pgLocksOfKey(t, tg.DB, k); len(locks) != 1 || locks[0].pid != holderPID {
						t.Fatalf("pg_locks for %s = %v; want only the holder %d", k, locks, holderPID)
					}
				})
			}
		})

		t.Run("Xact", func(t *testing.T) {
			for _, try := range []struct {
				name string
				f    func(context.Context, *sql.Tx, advisory.Key) (bool, error)
			}{
				{"TryXactLock", advisory.TryXactLock},
				{"TryXactLockShared", advisory.TryXactLockShared},
			} {
				t.Run(try.name, func(t *testing.T) {
					tx, err := tg.DB.BeginTx(ctx, nil)
					if err != nil {
						t.Fatal(err)
					}
					defer tx.Rollback()
					pid := pgtest.PID(t, tx)
					ok, err := try.f(ctx, tx, k)
					if err != nil || ok {
						t.Fatalf("%s on a key held exclusively elsewhere = %v, %v; want false, nil", try.name, ok, err)
					}
					// The transaction is still usable and holds nothing.
					pgRequireNoLocks(t, tg.DB, pid)
					if got := pgtest.PID(t, tx); got != pid {
						t.Fatalf("session changed from %d to %d", pid, got)
					}
					if err := tx.Commit(); err != nil {
						t.Fatalf("Commit after a failed try: %v", err)
					}
				})
			}
		})

		if err := advisory.Unlock(ctx, holder, k); err != nil {
			t.Fatal(err)
		}
	})
}

func testSessionSharedExclusive(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		keys := newPGKeys()

		t.Run("SharedCoexist", func(t *testing.T) {
			k := keys.next()
			a, b, c := pgtest.Conn(t, tg.DB), pgtest.Conn(t, tg.DB), pgtest.Conn(t, tg.DB)
			pidA, pidB := pgtest.PID(t, a), pgtest.PID(t, b)
			if err := advisory.LockShared(ctx, a, k); err != nil {
				t.Fatal(err)
			}
			if ok, err := advisory.TryLockShared(ctx, b, k); err != nil || !ok {
				t.Fatalf("TryLockShared beside a shared lock = %v, %v; want true", ok, err)
			}
			pgRequireHolds(t, tg.DB, pidA, k, true)
			pgRequireHolds(t, tg.DB, pidB, k, true)

			// Exclusive fails while shared locks are held, in both scopes.
			if ok, err := advisory.TryLock(ctx, c, k); err != nil || ok {
				t.Fatalf("TryLock beside shared locks = %v, %v; want false, nil", ok, err)
			}
			tx, err := tg.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := advisory.TryXactLock(ctx, tx, k); err != nil || ok {
				t.Fatalf("TryXactLock beside shared locks = %v, %v; want false, nil", ok, err)
			}
			// Shared transaction locks join them.
			if ok, err := advisory.TryXactLockShared(ctx, tx, k); err != nil || !ok {
				t.Fatalf("TryXactLockShared beside shared locks = %v, %v; want true", ok, err)
			}
			if err := advisory.XactLockShared(ctx, tx, k); err != nil {
				t.Fatalf("XactLockShared beside shared locks: %v", err)
			}
			txPID := pgtest.PID(t, tx)
			pgRequireHolds(t, tg.DB, txPID, k, true)
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}

			if err := advisory.UnlockShared(ctx, a, k); err != nil {
				t.Fatal(err)
			}
			// One shared lock left is enough to exclude.
			if ok, err := advisory.TryLock(ctx, c, k); err != nil || ok {
				t.Fatalf("TryLock beside one shared lock = %v, %v; want false, nil", ok, err)
			}
			if err := advisory.UnlockShared(ctx, b, k); err != nil {
				t.Fatal(err)
			}
			if ok, err := advisory.TryLock(ctx, c, k); err != nil || !ok {
				t.Fatalf("TryLock after the shared locks ended = %v, %v; want true", ok, err)
			}
			if err := advisory.Unlock(ctx, c, k); err != nil {
				t.Fatal(err)
			}
		})

		t.Run("ExclusiveExcludesShared", func(t *testing.T) {
			k := keys.nextPair()
			a, b := pgtest.Conn(t, tg.DB), pgtest.Conn(t, tg.DB)
			if err := advisory.Lock(ctx, a, k); err != nil {
				t.Fatal(err)
			}
			if ok, err := advisory.TryLockShared(ctx, b, k); err != nil || ok {
				t.Fatalf("TryLockShared beside an exclusive lock = %v, %v; want false, nil", ok, err)
			}
			tx, err := tg.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := advisory.TryXactLockShared(ctx, tx, k); err != nil || ok {
				t.Fatalf("TryXactLockShared beside an exclusive lock = %v, %v; want false, nil", ok, err)
			}
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
			if err := advisory.Unlock(ctx, a, k); err != nil {
				t.Fatal(err)
			}
			if ok, err := advisory.TryLockShared(ctx, b, k); err != nil || !ok {
				t.Fatalf("TryLockShared after the exclusive lock ended = %v, %v; want true", ok, err)
			}
			if err := advisory.UnlockShared(ctx, b, k); err != nil {
				t.Fatal(err)
			}
		})

		t.Run("SharedWaitsForExclusive", func(t *testing.T) {
			// A blocking shared lock waits for the exclusive holder and
			// is granted once it unlocks.
			k := keys.next()
			a, b := pgtest.Conn(t, tg.DB), pgtest.Conn(t, tg.DB)
			pidB := pgtest.PID(t, b)
			if err := advisory.Lock(ctx, a, k); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- advisory.LockShared(ctx, b, k) }()
			pgWaitWaiting(t, tg.DB, pidB, k)
			if err := advisory.Unlock(ctx, a, k); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatalf("LockShared after the exclusive holder unlocked: %v", err)
			}
			pgRequireHolds(t, tg.DB, pidB, k, true)
			if err := advisory.UnlockShared(ctx, b, k); err != nil {
				t.Fatal(err)
			}
		})
	})
}

// testSessionLockKeysNoDeadlock takes the same keys in different orders
// from two sessions at once, with LockKeys and with XactLockKeys, and finds
// neither a deadlock nor two holders.
func testSessionLockKeysNoDeadlock(t *testing.T) {
	// A kind takes and releases keys in its own way; round does it once
	// as worker i of two.
	type kind struct {
		name  string
		sets  func(a, b, p, q advisory.Key) [2][]advisory.Key
		setup func(t *testing.T, db *sql.DB) (round func(i int, keys []advisory.Key, inside *atomic.Int32) error)
	}
	kinds := []kind{
		{
			name: "Session",
			// {1, 2} against {2, 1}, within and across both key spaces,
			// and with a key repeated.
			sets: func(a, b, p, q advisory.Key) [2][]advisory.Key {
				return [2][]advisory.Key{{a, p, b, q}, {q, b, p, a, q}}
			},
			setup: func(t *testing.T, db *sql.DB) func(int, []advisory.Key, *atomic.Int32) error {
				ctx := context.Background()
				conns := [2]*sql.Conn{pgtest.Conn(t, db), pgtest.Conn(t, db)}
				for _, c := range conns {
					// A deadlock, if there were one, is found at once.
					pgtest.Exec(t, c, "SET deadlock_timeout = '50ms'")
				}
				return func(i int, keys []advisory.Key, inside *atomic.Int32) error {
					if err := advisory.LockKeys(ctx, conns[i], keys...); err != nil {
						return fmt.Errorf("session %d: LockKeys(%v): %w", i, keys, err)
					}
					if n := inside.Add(1); n != 1 {
						return fmt.Errorf("session %d: %d sessions hold the same exclusive keys", i, n)
					}
					inside.Add(-1)
					if err := advisory.UnlockKeys(ctx, conns[i], keys...); err != nil {
						return fmt.Errorf("session %d: UnlockKeys(%v): %w", i, keys, err)
					}
					return nil
				}
			},
		},
		{
			name: "Xact",
			sets: func(a, b, p, q advisory.Key) [2][]advisory.Key {
				return [2][]advisory.Key{{a, b, p, q}, {q, p, b, a}}
			},
			setup: func(t *testing.T, db *sql.DB) func(int, []advisory.Key, *atomic.Int32) error {
				ctx := context.Background()
				return func(i int, keys []advisory.Key, inside *atomic.Int32) error {
					err := func() error {
						tx, err := db.BeginTx(ctx, nil)
						if err != nil {
							return err
						}
						defer tx.Rollback()
						// A deadlock, if there were one, is found at once.
						if _, err := tx.ExecContext(ctx, "SET LOCAL deadlock_timeout = '50ms'"); err != nil {
							return err
						}
						if err := advisory.XactLockKeys(ctx, tx, keys...); err != nil {
							return fmt.Errorf("XactLockKeys(%v): %w", keys, err)
						}
						if n := inside.Add(1); n != 1 {
							return fmt.Errorf("%d transactions hold the same exclusive keys", n)
						}
						inside.Add(-1)
						return tx.Commit()
					}()
					if err != nil {
						return fmt.Errorf("transaction %d: %w", i, err)
					}
					return nil
				}
			},
		},
	}
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		for _, kd := range kinds {
			t.Run(kd.name, func(t *testing.T) {
				t.Parallel()
				keys := newPGKeys()
				a, b, p, q := keys.next(), keys.next(), keys.nextPair(), keys.nextPair()
				sets := kd.sets(a, b, p, q)
				rounds := 200
				if testing.Short() {
					rounds = 20
				}
				round := kd.setup(t, tg.DB)
				var inside atomic.Int32 // holders of the same exclusive keys
				var wg sync.WaitGroup
				errs := make(chan error, 2)
				for i := range 2 {
					wg.Go(func() {
						for range rounds {
							if err := round(i, sets[i], &inside); err != nil {
								errs <- err
								return
							}
						}
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					if errors.Is(err, advisory.ErrDeadlock) {
						t.Errorf("deadlock taking the same keys in another order: %v", err)
						continue
					}
					t.Error(err)
				}
				for _, k := range []advisory.Key{a, b, p, q} {
					pgRequireFree(t, tg.DB, k)
				}
			})
		}
	})
}

// pgManyKeys is more keys than a select list may hold (1664).
const pgManyKeys = 3000

func testSessionLockKeysMany(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		gen := newPGKeys()
		keys := make([]advisory.Key, pgManyKeys)
		for i := range keys {
			keys[i] = gen.next()
		}

		t.Run("Session", func(t *testing.T) {
			conn := pgtest.Conn(t, tg.DB)
			pid := pgtest.PID(t, conn)
			if err := advisory.LockKeys(ctx, conn, keys...); err != nil {
				t.Fatalf("LockKeys of %d keys: %s", len(keys), pgErrTail(err))
			}
			if n := len(pgLocksOfPID(t, tg.DB, pid)); n != len(keys) {
				t.Fatalf("pg_locks shows %d locks; want %d", n, len(keys))
			}
			if err := advisory.UnlockKeys(ctx, conn, keys...); err != nil {
				t.Fatalf("UnlockKeys of %d keys: %s", len(keys), pgErrTail(err))
			}
			pgRequireNoLocks(t, tg.DB, pid)
		})

		t.Run("Xact", func(t *testing.T) {
			tx, err := tg.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			pid := pgtest.PID(t, tx)
			if err := advisory.XactLockKeys(ctx, tx, keys...); err != nil {
				t.Fatalf("XactLockKeys of %d keys: %s", len(keys), pgErrTail(err))
			}
			if n := len(pgLocksOfPID(t, tg.DB, pid)); n != len(keys) {
				t.Fatalf("pg_locks shows %d locks; want %d", n, len(keys))
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			pgRequireNoLocks(t, tg.DB, pid)
		})
	})
}
