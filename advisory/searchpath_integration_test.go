package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// shadowSQL creates schema shadow, whose functions of the advisory
// locks' names take nothing and report success, and whose pg_locks shows
// no lock: a session whose search_path puts it before pg_catalog would
// use them wherever a statement names them without a schema.
func shadowSQL() []string {
	stmts := []string{"CREATE SCHEMA shadow"}
	for _, sig := range []string{"bigint", "integer, integer"} {
		for _, f := range []string{"pg_try_advisory_lock", "pg_try_advisory_lock_shared",
			"pg_try_advisory_xact_lock", "pg_try_advisory_xact_lock_shared",
			"pg_advisory_unlock", "pg_advisory_unlock_shared"} {
			stmts = append(stmts, "CREATE FUNCTION shadow."+f+"("+sig+") RETURNS boolean LANGUAGE sql AS 'SELECT true'")
		}
		for _, f := range []string{"pg_advisory_lock", "pg_advisory_lock_shared",
			"pg_advisory_xact_lock", "pg_advisory_xact_lock_shared"} {
			stmts = append(stmts, "CREATE FUNCTION shadow."+f+"("+sig+") RETURNS void LANGUAGE sql AS ''")
		}
	}
	return append(stmts,
		"CREATE FUNCTION shadow.pg_advisory_unlock_all() RETURNS void LANGUAGE sql AS ''",
		"CREATE VIEW shadow.pg_locks AS SELECT * FROM pg_catalog.pg_locks WHERE false")
}

// TestSearchPathShadowIntegration: a session whose search_path puts a
// schema of look-alike functions before pg_catalog (shadow, whose
// pg_try_advisory_lock always returns true) still gets the server's
// locks: with a key held by another session, TryLock and TryXactLock
// report false, WithXactLock(Try()) and WithSessionLock(Timeout) do not
// run fn, and Acquire(Try()) reports ErrNotAcquired, not a shared
// session. Unqualified SQL on the same session is fooled, which shows
// that the shadow is in effect.
func TestSearchPathShadowIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		tg = pgtest.NewDatabase(t, tg, "searchpath-shadow")
		for _, stmt := range shadowSQL() {
			pgtest.Exec(t, tg.DB, stmt)
		}
		shadowed := pgtest.OpenSetting(t, tg, "search_path", "shadow,pg_catalog")
		keys := newPGKeys()

		for _, key := range []advisory.Key{keys.next(), keys.nextPair()} {
			holder := pgtest.Conn(t, tg.DB)
			if err := advisory.Lock(ctx, holder, key); err != nil {
				t.Fatal(err)
			}

			conn := pgtest.Conn(t, shadowed)
			if key.IsPair() {
				var fooled bool
				k1, k2, _ := key.Pair()
				if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1, $2)", k1, k2).Scan(&fooled); err != nil || !fooled {
					t.Fatalf("the shadow is not in effect: unqualified pg_try_advisory_lock = %v, %v", fooled, err)
				}
			} else {
				var fooled bool
				if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock("+pgArg(key)+")").Scan(&fooled); err != nil || !fooled {
					t.Fatalf("the shadow is not in effect: unqualified pg_try_advisory_lock = %v, %v", fooled, err)
				}
			}
			if ok, err := advisory.TryLock(ctx, conn, key); ok || err != nil {
				t.Errorf("TryLock(%v) on a key held elsewhere = %v, %v; want false", key, ok, err)
			}
			if ok, err := advisory.TryLockShared(ctx, conn, key); ok || err != nil {
				t.Errorf("TryLockShared(%v) on a key held elsewhere = %v, %v; want false", key, ok, err)
			}
			if err := conn.Close(); err != nil {
				t.Fatal(err)
			}

			tx, err := shadowed.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := advisory.TryXactLock(ctx, tx, key); ok || err != nil {
				t.Errorf("TryXactLock(%v) on a key held elsewhere = %v, %v; want false", key, ok, err)
			}
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}

			ran := false
			err = advisory.WithXactLock(ctx, shadowed, key, func(context.Context, *sql.Tx) error {
				ran = true
				return nil
			}, advisory.Try())
			if ran || !errors.Is(err, advisory.ErrNotAcquired) {
				t.Errorf("WithXactLock(%v, Try()): fn ran %v, err %v; want ErrNotAcquired without fn", key, ran, err)
			}
			err = advisory.WithSessionLock(ctx, shadowed, key, func(context.Context, *sql.Conn) error {
				ran = true
				return nil
			}, advisory.Wait(200*time.Millisecond))
			if ran || !errors.Is(err, advisory.ErrLockTimeout) {
				t.Errorf("WithSessionLock(%v, Wait(200ms)): fn ran %v, err %v; want ErrLockTimeout without fn", key, ran, err)
			}

			l, err := advisory.Acquire(ctx, shadowed, key, advisory.Try())
			if err == nil {
				_ = l.Release(ctx)
			}
			if !errors.Is(err, advisory.ErrNotAcquired) || errors.Is(err, advisory.ErrSharedSession) {
				t.Errorf("Acquire(%v, Try()) = %v; want ErrNotAcquired", key, err)
			}

			if err := advisory.Unlock(ctx, holder, key); err != nil {
				t.Fatal(err)
			}
			if err := holder.Close(); err != nil {
				t.Fatal(err)
			}

			// With the key free, the shadowed session takes it for real.
			l, err = advisory.Acquire(ctx, shadowed, key, advisory.Try(), advisory.Fencing())
			if err != nil {
				t.Fatalf("Acquire(%v) on a free key: %v", key, err)
			}
			pgRequireHolds(t, tg.DB, pgLeasePID(t, tg.DB, key), key, false)
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}
