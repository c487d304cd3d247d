package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// Integration tests of the transaction scope, WithXactLock (xactscope.go):
// what it does, through PgBouncer in transaction mode, and under random
// cancellations (on the pool-hygiene run of
// sessionscope_hygiene_integration_test.go). What both scopes do alike is
// in scoped_integration_test.go.

// TestWithXactLockIntegration runs the integration tests of the
// transaction scope, one subtest a theme, each on every server and driver.
func TestWithXactLockIntegration(t *testing.T) {
	t.Run("Basics", testWithXactLockBasics)
	t.Run("Pooler", testWithXactLockPooler)
	t.Run("GhostPoolHygiene", testWithXactLockGhostPoolHygiene)
}

func testWithXactLockBasics(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		keys := newPGKeys()
		table := pgTable(t, tg.DB)

		t.Run("CommitsOnNil", func(t *testing.T) {
			k := keys.next()
			other := pgtest.Conn(t, tg.DB)
			err := advisory.WithXactLock(ctx, tg.DB, k, func(ctx context.Context, tx *sql.Tx) error {
				pgRequireHolds(t, tg.DB, pgtest.PID(t, tx), k, false)
				if ok, err := advisory.TryLock(ctx, other, k); err != nil || ok {
					t.Errorf("TryLock from another session inside fn = %v, %v; want false", ok, err)
				}
				_, err := tx.ExecContext(ctx, "INSERT INTO "+table+" VALUES (1)")
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if n := pgCount(t, tg.DB, table, 1); n != 1 {
				t.Fatalf("%d rows after fn returned nil; want 1 committed", n)
			}
			pgRequireFree(t, tg.DB, k)
		})

		t.Run("RollsBackOnError", func(t *testing.T) {
			k := keys.next()
			err := advisory.WithXactLock(ctx, tg.DB, k, func(ctx context.Context, tx *sql.Tx) error {
				if _, err := tx.ExecContext(ctx, "INSERT INTO "+table+" VALUES (2)"); err != nil {
					return err
				}
				return errScopedFn
			})
			if !errors.Is(err, errScopedFn) {
				t.Fatalf("WithXactLock = %v; want fn's error", err)
			}
			if n := pgCount(t, tg.DB, table, 2); n != 0 {
				t.Fatalf("%d rows after fn failed; want 0", n)
			}
			pgRequireFree(t, tg.DB, k)
		})

		t.Run("RollsBackOnPanic", func(t *testing.T) {
			k := keys.next()
			db := pgOpenOne(t, tg)
			var pid int
			p := func() (p any) {
				defer func() { p = recover() }()
				_ = advisory.WithXactLock(ctx, db, k, func(ctx context.Context, tx *sql.Tx) error {
					pid = pgtest.PID(t, tx)
					if _, err := tx.ExecContext(ctx, "INSERT INTO "+table+" VALUES (3)"); err != nil {
						return err
					}
					panic(errScopedFn)
				})
				return nil
			}()
			if p != errScopedFn {
				t.Fatalf("recovered %v; want fn's panic to continue", p)
			}
			if n := pgCount(t, tg.DB, table, 3); n != 0 {
				t.Fatalf("%d rows after fn panicked; want 0", n)
			}
			pgRequireFree(t, tg.DB, k)
			// Rolled back, so the connection is clean and goes back to the pool.
			pgRequirePooledClean(t, tg.DB, db, pid)
		})

		t.Run("FnCommitsEarly", func(t *testing.T) {
			k := keys.next()
			err := advisory.WithXactLock(ctx, tg.DB, k, func(ctx context.Context, tx *sql.Tx) error {
				if _, err := tx.ExecContext(ctx, "INSERT INTO "+table+" VALUES (4)"); err != nil {
					return err
				}
				if err := advisory.CommitEarly(ctx); err != nil {
					return err
				}
				// Committed, so the lock is already free while fn runs on.
				pgRequireFree(t, tg.DB, k)
				return nil
			})
			if err != nil {
				t.Fatalf("WithXactLock whose fn committed early = %v; want nil", err)
			}
			if n := pgCount(t, tg.DB, table, 4); n != 1 {
				t.Fatalf("%d rows after fn committed; want 1", n)
			}
			pgRequireFree(t, tg.DB, k)
		})

		t.Run("TxOptions", func(t *testing.T) {
			err := advisory.WithXactLock(ctx, tg.DB, keys.next(), func(ctx context.Context, tx *sql.Tx) error {
				if v := pgShow(t, tx, "transaction_read_only"); v != "on" {
					t.Errorf("transaction_read_only = %q; want on", v)
				}
				if v := pgShow(t, tx, "transaction_isolation"); v != "serializable" {
					t.Errorf("transaction_isolation = %q; want serializable", v)
				}
				return nil
			}, advisory.TxOptions(&sql.TxOptions{Isolation: sql.LevelSerializable, ReadOnly: true}))
			if err != nil {
				t.Fatal(err)
			}
		})

	})
}

// testWithXactLockPooler runs transaction scopes on one key from
// several clients through PgBouncer in transaction mode: transaction
// locks work through it, and no two critical sections overlap.
func testWithXactLockPooler(t *testing.T) {
	const clients, each = 4, 25
	for _, srv := range pgtest.Servers(t) {
		for _, d := range pgtest.Drivers {
			t.Run(fmt.Sprintf("%s/%s", srv.Name, d), func(t *testing.T) {
				t.Parallel()
				bouncer := srv.PgBouncer(t, 2)
				key := newPGKeys().next()
				var inside, overlaps, entered atomic.Int64
				var wg sync.WaitGroup
				for range clients {
					db := bouncer.Open(t, d)
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range each {
							err := advisory.WithXactLock(context.Background(), db, key, func(context.Context, *sql.Tx) error {
								if inside.Add(1) > 1 {
									overlaps.Add(1)
								}
								entered.Add(1)
								time.Sleep(time.Millisecond)
								inside.Add(-1)
								return nil
							})
							if err != nil {
								t.Errorf("WithXactLock through PgBouncer: %v", err)
								return
							}
						}
					}()
				}
				wg.Wait()
				t.Logf("%d critical sections through PgBouncer, %d overlapped", entered.Load(), overlaps.Load())
				if overlaps.Load() != 0 || entered.Load() != clients*each {
					t.Errorf("%d of %d critical sections ran, %d overlapped; want all, and none", entered.Load(), clients*each, overlaps.Load())
				}
			})
		}
	}
}

// errHygienePanic is what fn panics with in the xact hygiene test.
var errHygienePanic = errors.New("fn panicked on purpose")

func testWithXactLockGhostPoolHygiene(t *testing.T) {
	pgtest.EachDriver(t, pgAllDrivers, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		var outcomes hygieneOutcomes
		db, _, keys := runHygiene(t, tg, func(db *sql.DB, h *hygieneRun, g *rwGuard) (err error) {
			ctx, cancel, wait := h.hygieneCtx()
			defer cancel()
			defer wait()
			var opts []advisory.LockOption
			if h.shared {
				opts = append(opts, advisory.Shared())
			}
			v := h.variant
			try, bounded, panicking, commitEarly := v == 0, v == 1, v == 2 || v == 3, v == 4
			switch {
			case try:
				opts = append(opts, advisory.Try())
				h.desc += " with Try"
			case bounded:
				opts = append(opts, advisory.Wait(h.delay+time.Millisecond))
				h.desc += " with Timeout"
			}
			if panicking {
				h.desc += ", fn panics"
			}
			if commitEarly {
				h.desc += ", fn commits"
			}

			var fnErr error
			fnRan := false
			func() {
				defer func() {
					if p := recover(); p != nil {
						if p != errHygienePanic {
							panic(p)
						}
						err = errHygienePanic
					}
				}()
				err = advisory.WithXactLock(ctx, db, h.key, func(ctx context.Context, tx *sql.Tx) error {
					fnRan = true
					var waitFn func()
					waitFn, fnErr = h.critical(ctx, tx, cancel, g)
					waitFn()
					if panicking {
						panic(errHygienePanic)
					}
					if commitEarly && fnErr == nil {
						fnErr = advisory.CommitEarly(ctx)
					}
					return fnErr
				}, as[advisory.XactOption](opts)...)
			}()
			if h.point == cancelAfter {
				cancel()
			}
			outcomes.add(err)
			switch {
			case err == nil && !fnRan:
				return fmt.Errorf("%s: WithXactLock returned nil without running fn", h.desc)
			case errors.Is(err, errHygienePanic):
				if !fnRan || !panicking {
					return fmt.Errorf("%s: unexpected panic (fn ran: %v)", h.desc, fnRan)
				}
			case errors.Is(err, advisory.ErrLockLost), errors.Is(err, advisory.ErrNotHeld):
				return fmt.Errorf("%s: %w", h.desc, err)
			case errors.Is(err, advisory.ErrNotAcquired):
				if !try || fnRan {
					return fmt.Errorf("%s: %w (fn ran: %v)", h.desc, err, fnRan)
				}
			case errors.Is(err, advisory.ErrLockTimeout):
				if !bounded || fnRan {
					return fmt.Errorf("%s: %w (fn ran: %v)", h.desc, err, fnRan)
				}
			case err != nil && !h.interrupted() && !hygieneExcused(tg.Driver, err, fnRan):
				return fmt.Errorf("%s: uninterrupted WithXactLock failed: %w", h.desc, err)
			case fnErr != nil && !errors.Is(err, fnErr):
				return fmt.Errorf("%s: fn returned %v, WithXactLock %v", h.desc, fnErr, err)
			}
			return nil
		})
		t.Logf("outcomes: %v", &outcomes)

		ran := false
		err := advisory.WithXactLock(context.Background(), db, keys[1], func(context.Context, *sql.Tx) error {
			ran = true
			return nil
		})
		if err != nil || !ran {
			t.Fatalf("WithXactLock after the storm = %v (fn ran: %v)", err, ran)
		}
		pgRequireFree(t, tg.DB, keys[1])
	})
}
