package sqlxlock_test

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
	"github.com/pgadvisory/pgadvisory/sqlxlock"
)

// Integration tests on PostgreSQL, every server and both drivers. fn uses
// sqlx's own features (Get, Select, NamedExec, Rebind) to show that it has
// a real sqlx value with the driver's bind style.

// sqlxDB wraps tg's database for sqlx, under the driver name sqlx knows:
// "postgres" for lib/pq, "pgx" for pgx stdlib. Both bind $1, $2, ...
func sqlxDB(tg pgtest.Target) *sqlx.DB {
	name := "pgx"
	if tg.Driver == pgtest.DriverPQ {
		name = "postgres"
	}
	return sqlx.NewDb(tg.DB, name)
}

// randomKey returns a pair key that no other test uses, with both halves
// positive so that pg_locks shows them as they are.
func randomKey() (key advisory.Key, ns, id int32) {
	ns, id = mrand.Int32N(1<<30)+1, mrand.Int32N(1<<30)+1
	return advisory.PairKey(ns, id), ns, id
}

// heldHere counts the granted advisory locks of the current session on
// the pair key (ns, id); "?" is rebound by the caller's sqlx value.
const heldHere = `SELECT count(*) FROM pg_locks
	WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted
	AND classid::bigint = ? AND objid::bigint = ? AND objsubid = 2`

// requireFree fails t unless another session can take key at once.
func requireFree(t *testing.T, db *sqlx.DB, key advisory.Key) {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ok, err := advisory.TryLock(ctx, conn.Conn, key)
	if err != nil || !ok {
		t.Fatalf("TryLock(%s) after the helper returned = %v, %v; want true: the lock outlived the call", key, ok, err)
	}
	if err := advisory.Unlock(ctx, conn.Conn, key); err != nil {
		t.Fatal(err)
	}
}

var items = []item{{1, "a"}, {2, "b"}, {3, "c"}}

// useSqlx runs sqlx's features on tx and checks that tx holds (ns, id).
func useSqlx(ctx context.Context, tx *sqlx.Tx, table string, ns, id int32) error {
	if _, err := tx.NamedExecContext(ctx, "INSERT INTO "+table+" (id, name) VALUES (:id, :name)", items); err != nil {
		return fmt.Errorf("NamedExec: %w", err)
	}
	var got []item
	if err := tx.SelectContext(ctx, &got, "SELECT id, name FROM "+table+" ORDER BY id"); err != nil {
		return fmt.Errorf("Select: %w", err)
	}
	if !slices.Equal(got, items) {
		return fmt.Errorf("Select = %v, want %v", got, items)
	}
	var one item
	if err := tx.GetContext(ctx, &one, tx.Rebind("SELECT id, name FROM "+table+" WHERE id = ?"), 2); err != nil || one != items[1] {
		return fmt.Errorf("Get = %v, %v; want %v", one, err, items[1])
	}
	var n int
	if err := tx.GetContext(ctx, &n, tx.Rebind(heldHere), ns, id); err != nil || n != 1 {
		return fmt.Errorf("locks held on %d:%d = %d, %v; want 1", ns, id, n, err)
	}
	return nil
}

func TestWithXactLockIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		db := sqlxDB(tg)
		key, ns, id := randomKey()
		err := sqlxlock.WithXactLock(ctx, db, key, func(ctx context.Context, tx *sqlx.Tx) error {
			if _, err := tx.ExecContext(ctx, "CREATE TEMP TABLE items (id int PRIMARY KEY, name text NOT NULL) ON COMMIT DROP"); err != nil {
				return err
			}
			return useSqlx(ctx, tx, "items", ns, id)
		}, advisory.Try())
		if err != nil {
			t.Fatal(err)
		}
		requireFree(t, db, key)
	})
}

// TestWithXactLockRollbackIntegration checks that an fn that fails or
// panics leaves neither its writes nor the lock behind.
func TestWithXactLockRollbackIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		for _, tc := range []struct {
			name string
			end  func() error
		}{
			{"Error", func() error { return errBoom }},
			{"Panic", func() error { panic(errBoom) }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ctx := context.Background()
				db := sqlxDB(tg)
				key, ns, id := randomKey()
				table := fmt.Sprintf("sqlxlock_rollback_%d", mrand.Uint32())
				if _, err := db.ExecContext(ctx, "CREATE TABLE "+table+" (id int PRIMARY KEY, name text NOT NULL)"); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE "+table) })

				err := recovered(func() error {
					return sqlxlock.WithXactLock(ctx, db, key, func(ctx context.Context, tx *sqlx.Tx) error {
						if err := useSqlx(ctx, tx, table, ns, id); err != nil {
							t.Error(err)
						}
						return tc.end()
					})
				})
				if !errors.Is(err, errBoom) {
					t.Fatalf("err = %v, want %v", err, errBoom)
				}
				var n int
				if err := db.GetContext(ctx, &n, "SELECT count(*) FROM "+table); err != nil || n != 0 {
					t.Errorf("rows after rollback = %d, %v; want 0", n, err)
				}
				requireFree(t, db, key)
			})
		}
	})
}

// TestContentionIntegration checks that a key held elsewhere gives
// advisory's errors, without calling fn.
func TestContentionIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		db := sqlxDB(tg)
		key, _, _ := randomKey()
		holder, err := db.Connx(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Close()
		if err := advisory.Lock(ctx, holder.Conn, key); err != nil {
			t.Fatal(err)
		}

		xactFn := func(context.Context, *sqlx.Tx) error { t.Error("fn called without the lock"); return nil }
		sessFn := func(context.Context, *sqlx.Conn) error { t.Error("fn called without the lock"); return nil }
		for _, tc := range []struct {
			name string
			err  error
			want error
		}{
			{"XactTry", sqlxlock.WithXactLock(ctx, db, key, xactFn, advisory.Try()), advisory.ErrNotAcquired},
			{"XactTryShared", sqlxlock.WithXactLock(ctx, db, key, xactFn, advisory.Try(), advisory.Shared()), advisory.ErrNotAcquired},
			{"XactTimeout", sqlxlock.WithXactLock(ctx, db, key, xactFn, advisory.Wait(20*time.Millisecond)), advisory.ErrLockTimeout},
			{"SessionTry", sqlxlock.WithSessionLock(ctx, db, key, sessFn, advisory.Try()), advisory.ErrNotAcquired},
			{"SessionTimeout", sqlxlock.WithSessionLock(ctx, db, key, sessFn, advisory.Wait(20*time.Millisecond)), advisory.ErrLockTimeout},
		} {
			if !errors.Is(tc.err, tc.want) {
				t.Errorf("%s: err = %v, want %v", tc.name, tc.err, tc.want)
			}
		}
		if err := advisory.Unlock(ctx, holder.Conn, key); err != nil {
			t.Fatal(err)
		}
		requireFree(t, db, key)
	})
}

// TestSharedIntegration checks that the options reach the lock: a shared
// transaction lock admits another shared holder and refuses an exclusive
// one.
func TestSharedIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		db := sqlxDB(tg)
		key, _, _ := randomKey()
		err := sqlxlock.WithXactLock(ctx, db, key, func(ctx context.Context, _ *sqlx.Tx) error {
			other, err := db.Connx(ctx)
			if err != nil {
				return err
			}
			defer other.Close()
			if ok, err := advisory.TryLock(ctx, other.Conn, key); err != nil || ok {
				return fmt.Errorf("exclusive TryLock beside a shared holder = %v, %v; want false", ok, err)
			}
			if ok, err := advisory.TryLockShared(ctx, other.Conn, key); err != nil || !ok {
				return fmt.Errorf("TryLockShared beside a shared holder = %v, %v; want true", ok, err)
			}
			return advisory.UnlockShared(ctx, other.Conn, key)
		}, advisory.Shared())
		if err != nil {
			t.Fatal(err)
		}
		requireFree(t, db, key)
	})
}

func TestWithSessionLockIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		db := sqlxDB(tg)
		key, ns, id := randomKey()
		err := sqlxlock.WithSessionLock(ctx, db, key, func(ctx context.Context, conn *sqlx.Conn) error {
			var n int
			if err := conn.GetContext(ctx, &n, conn.Rebind(heldHere), ns, id); err != nil || n != 1 {
				return fmt.Errorf("locks held on the session = %d, %v; want 1", n, err)
			}
			// Two transactions under one session lock, the second seeing
			// the first's work.
			for i := range 2 {
				tx, err := conn.BeginTxx(ctx, nil)
				if err != nil {
					return err
				}
				if i == 0 {
					_, err = tx.ExecContext(ctx, "CREATE TEMP TABLE items (id int PRIMARY KEY, name text NOT NULL)")
				} else {
					err = useSqlx(ctx, tx, "items", ns, id)
					if err == nil {
						_, err = tx.ExecContext(ctx, "DROP TABLE items")
					}
				}
				if err != nil {
					_ = tx.Rollback()
					return err
				}
				if err := tx.Commit(); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		requireFree(t, db, key)
	})
}

// TestWithSessionLockPanicIntegration checks that a panic in fn ends the
// session, and with it the lock, instead of pooling it.
func TestWithSessionLockPanicIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		db := sqlxDB(tg)
		key, _, _ := randomKey()
		err := recovered(func() error {
			return sqlxlock.WithSessionLock(ctx, db, key, func(context.Context, *sqlx.Conn) error { panic(errBoom) })
		})
		if !errors.Is(err, errBoom) {
			t.Fatalf("err = %v, want the panic %v", err, errBoom)
		}
		// The server ends the closed session on its own schedule; wait for
		// the key rather than guess how long that takes.
		err = sqlxlock.WithXactLock(ctx, db, key, func(context.Context, *sqlx.Tx) error { return nil }, advisory.Wait(time.Minute))
		if err != nil {
			t.Fatalf("waiting for the key after the panic: %v", err)
		}
		// And no pooled session holds it.
		for range 3 {
			requireFree(t, db, key)
		}
	})
}
