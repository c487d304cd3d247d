package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// Integration tests of the transaction lock functions on *sql.Tx
// (xact.go).

// TestXactIntegration runs the integration tests of the transaction lock
// functions, one subtest a theme, each on every server and driver.
func TestXactIntegration(t *testing.T) {
	t.Run("Release", testXactRelease)
	t.Run("XactLockKeys", testXactLockKeys)
	t.Run("XactLockCancel", testXactLockCancel)
	t.Run("XactLockRunOutKeepsTx", testXactLockRunOutKeepsTx)
}

// pgXactLockFunc takes key in tx and reports whether it did.
type pgXactLockFunc struct {
	name   string
	shared bool
	f      func(ctx context.Context, tx *sql.Tx, key advisory.Key) (bool, error)
}

// pgXactLockFuncs are every way to take a transaction lock on one key.
var pgXactLockFuncs = []pgXactLockFunc{
	{"XactLock", false, func(ctx context.Context, tx *sql.Tx, k advisory.Key) (bool, error) {
		return true, advisory.XactLock(ctx, tx, k)
	}},
	{"XactLockShared", true, func(ctx context.Context, tx *sql.Tx, k advisory.Key) (bool, error) {
		return true, advisory.XactLockShared(ctx, tx, k)
	}},
	{"TryXactLock", false, advisory.TryXactLock},
	{"TryXactLockShared", true, advisory.TryXactLockShared},
	{"XactLockKeys", false, func(ctx context.Context, tx *sql.Tx, k advisory.Key) (bool, error) {
		return true, advisory.XactLockKeys(ctx, tx, k, k)
	}},
}

func testXactRelease(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		keys := newPGKeys()
		for _, end := range []string{"Commit", "Rollback"} {
			for _, lf := range pgXactLockFuncs {
				t.Run(end+"/"+lf.name, func(t *testing.T) {
					k := keys.next()
					other := pgtest.Conn(t, tg.DB)
					tx, err := tg.DB.BeginTx(ctx, nil)
					if err != nil {
						t.Fatal(err)
					}
					defer tx.Rollback()
					pid := pgtest.PID(t, tx)
					if ok, err := lf.f(ctx, tx, k); err != nil || !ok {
						t.Fatalf("%s on a free key = %v, %v; want true", lf.name, ok, err)
					}
					// Taking it again in the same transaction succeeds at once.
					if ok, err := lf.f(ctx, tx, k); err != nil || !ok {
						t.Fatalf("%s again in the same transaction = %v, %v; want true", lf.name, ok, err)
					}
					pgRequireHolds(t, tg.DB, pid, k, lf.shared)
					if ok, err := advisory.TryLock(ctx, other, k); err != nil || ok {
						t.Fatalf("another session's TryLock during the transaction = %v, %v; want false", ok, err)
					}

					if end == "Commit" {
						err = tx.Commit()
					} else {
						err = tx.Rollback()
					}
					if err != nil {
						t.Fatal(err)
					}
					// Released with the transaction; the session lives on.
					pgRequireFree(t, tg.DB, k)
					if ok, err := advisory.TryLock(ctx, other, k); err != nil || !ok {
						t.Fatalf("another session's TryLock after %s = %v, %v; want true", end, ok, err)
					}
					if err := advisory.Unlock(ctx, other, k); err != nil {
						t.Fatal(err)
					}
				})
			}
		}
	})
}

func testXactLockKeys(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		keys := newPGKeys()
		a, b, c := keys.next(), keys.nextPair(), keys.next()
		tx, err := tg.DB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		pid := pgtest.PID(t, tx)
		if err := advisory.XactLockKeys(ctx, tx, b, c, a, b); err != nil {
			t.Fatal(err)
		}
		locks := pgLocksOfPID(t, tg.DB, pid)
		if len(locks) != 3 {
			t.Fatalf("pg_locks shows %v; want %s, %s and %s", locks, a, b, c)
		}
		for _, k := range []advisory.Key{a, b, c} {
			pgRequireHolds(t, tg.DB, pid, k, false)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		pgRequireNoLocks(t, tg.DB, pid)
	})
}

func testXactLockCancel(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		keys := newPGKeys()
		for _, tc := range []struct {
			name string
			want error
		}{
			{"Canceled", context.Canceled},
			{"DeadlineExceeded", context.DeadlineExceeded},
		} {
			t.Run(tc.name, func(t *testing.T) {
				k := keys.next()
				holder := pgtest.Conn(t, tg.DB)
				if err := advisory.Lock(context.Background(), holder, k); err != nil {
					t.Fatal(err)
				}
				tx, err := tg.DB.BeginTx(context.Background(), nil)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback()
				pid := pgtest.PID(t, tx)

				// The open transaction's session is warm: XactLock
				// reaches the server at once.
				_, err = pgEndWhileWaiting(t, tg.DB, pid, k, tc.want, func(ctx context.Context) error {
					return advisory.XactLock(ctx, tx, k)
				})
				if !errors.Is(err, tc.want) {
					t.Fatalf("XactLock with ctx ending while it waits = %v; want an error wrapping %v", err, tc.want)
				}
				_ = tx.Rollback()
				if err := advisory.Unlock(context.Background(), holder, k); err != nil {
					t.Fatal(err)
				}
				// Whatever the driver did with the session, it ends up
				// holding nothing.
				pgtest.Await(t, fmt.Sprintf("backend %d to hold no advisory lock after the rollback", pid), func() (bool, error) {
					locks, err := pgQueryLocksOfPID(context.Background(), tg.DB, pid)
					return len(locks) == 0, err
				})
				pgtest.AwaitFree(t, tg.DB, k)
			})
		}
	})
}

// testXactLockRunOutKeepsTx proves that a wait in a caller's
// transaction that its lock_timeout ends leaves the transaction as it was:
// the error is ErrLockTimeout, and the transaction goes on and commits.
func testXactLockRunOutKeepsTx(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		key := newPGKeys().nextPair()
		holder := pgtest.Conn(t, tg.DB)
		if err := advisory.Lock(ctx, holder, key); err != nil {
			t.Fatal(err)
		}
		defer advisory.Unlock(ctx, holder, key)
		tx, err := tg.DB.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		pgtest.Exec(t, tx, "SET LOCAL lock_timeout = '1500ms'")
		if err := advisory.XactLock(ctx, tx, key); !errors.Is(err, advisory.ErrLockTimeout) {
			t.Fatalf("XactLock on a held key under lock_timeout = %v; want ErrLockTimeout", err)
		}
		pgtest.Exec(t, tx, "SELECT 1")
		if err := tx.Commit(); err != nil {
			t.Fatalf("commit after the wait ran out: %v", err)
		}
	})
}
