package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/scope"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// The integration tests of what every entry point does alike (the lock
// functions of session.go and xact.go, both scopes, leases and the
// Locker), which no single API's file owns. They are the subtests of
// TestEntryPointsIntegration: the engine's identification, a search_path
// that shadows pg_catalog, and waits that hold no snapshot, in this file;
// a hot standby, in entrypoints_standby_integration_test.go; the round
// trips of each call, in entrypoints_roundtrips_integration_test.go; and
// pgx's query modes and prepared statements, in
// entrypoints_pgx_integration_test.go.

// TestEntryPointsIntegration runs the integration tests of every entry
// point alike, one subtest a theme, each on every server and driver.
func TestEntryPointsIntegration(t *testing.T) {
	t.Run("Engine", testEntryPointsEngine)
	t.Run("SearchPathShadow", testEntryPointsSearchPathShadow)
	t.Run("WaitHoldsNoSnapshot", testEntryPointsWaitHoldsNoSnapshot)
	t.Run("Standby", testEntryPointsStandby)
	t.Run("RoundTrips", testEntryPointsRoundTrips)
	t.Run("PgxExecModes", testEntryPointsPgxExecModes)
	t.Run("PreparedStatements", testEntryPointsPreparedStatements)
}

// handoffBound is how soon after its release a waiter must get the key
// in TestEntryPointsIntegration/WaitHoldsNoSnapshot: well under a slice,
// since a waiter stays queued in the server between its slices but for a
// round trip, and generous for a loaded machine.
const handoffBound = 2 * time.Second

// waitEntryPoints are the public calls that wait for a busy key, each as
// a pgtest.Waiter, and whether CREATE INDEX CONCURRENTLY can finish while
// it waits: not for a wait in a transaction the caller keeps open.
var waitEntryPoints = []struct {
	name string
	cic  bool
	wait func(ctx context.Context, db *sql.DB, key advisory.Key, held func()) error
}{
	{"Lock", true, func(ctx context.Context, db *sql.DB, key advisory.Key, held func()) error {
		return onConn(ctx, db, func(conn *sql.Conn) error {
			if err := advisory.Lock(ctx, conn, key); err != nil {
				return err
			}
			held()
			return advisory.Unlock(ctx, conn, key)
		})
	}},
	{"LockShared", true, func(ctx context.Context, db *sql.DB, key advisory.Key, held func()) error {
		return onConn(ctx, db, func(conn *sql.Conn) error {
			if err := advisory.LockShared(ctx, conn, key); err != nil {
				return err
			}
			held()
			return advisory.UnlockShared(ctx, conn, key)
		})
	}},
	{"LockKeys", true, func(ctx context.Context, db *sql.DB, key advisory.Key, held func()) error {
		other := advisory.PairKey(-7, -7)
		return onConn(ctx, db, func(conn *sql.Conn) error {
			if err := advisory.LockKeys(ctx, conn, key, other); err != nil {
				return err
			}
			held()
			return advisory.UnlockKeys(ctx, conn, key, other)
		})
	}},
	{"XactLock", false, func(ctx context.Context, db *sql.DB, key advisory.Key, held func()) error {
		return inTx(ctx, db, func(tx *sql.Tx) error {
			if err := advisory.XactLock(ctx, tx, key); err != nil {
				return err
			}
			held()
			return nil
		})
	}},
	{"XactLockKeys", false, func(ctx context.Context, db *sql.DB, key advisory.Key, held func()) error {
		return inTx(ctx, db, func(tx *sql.Tx) error {
			if err := advisory.XactLockKeys(ctx, tx, key, advisory.Int64Key(-7)); err != nil {
				return err
			}
			held()
			return nil
		})
	}},
	{"WithSessionLock", true, func(ctx context.Context, db *sql.DB, key advisory.Key, held func()) error {
		return advisory.WithSessionLock(ctx, db, key, func(context.Context, *sql.Conn) error {
			held()
			return nil
		})
	}},
	{"WithSessionLockTimeout", true, func(ctx context.Context, db *sql.DB, key advisory.Key, held func()) error {
		return advisory.WithSessionLock(ctx, db, key, func(context.Context, *sql.Conn) error {
			held()
			return nil
		}, advisory.Wait(time.Minute))
	}},
	{"WithXactLock", true, func(ctx context.Context, db *sql.DB, key advisory.Key, held func()) error {
		return advisory.WithXactLock(ctx, db, key, func(context.Context, *sql.Tx) error {
			held()
			return nil
		})
	}},
	{"WithXactLockRepeatableRead", true, func(ctx context.Context, db *sql.DB, key advisory.Key, held func()) error {
		return advisory.WithXactLock(ctx, db, key, func(context.Context, *sql.Tx) error {
			held()
			return nil
		}, advisory.TxOptions(&sql.TxOptions{Isolation: sql.LevelRepeatableRead}))
	}},
	{"WithXactLockTx", false, func(ctx context.Context, db *sql.DB, key advisory.Key, held func()) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		return advisory.WithXactLockTx(ctx, tx, key, func(context.Context, *sql.Tx) error {
			held()
			return nil
		})
	}},
	{"Acquire", true, func(ctx context.Context, db *sql.DB, key advisory.Key, held func()) error {
		l, err := advisory.Acquire(ctx, db, key)
		if err != nil {
			return err
		}
		held()
		return l.Release(ctx)
	}},
	{"LockerAcquire", true, func(ctx context.Context, db *sql.DB, key advisory.Key, held func()) error {
		locker, err := advisory.NewLocker(db, advisory.LockerConfig{})
		if err != nil {
			return err
		}
		defer locker.Close(ctx)
		l, err := locker.Acquire(ctx, key)
		if err != nil {
			return err
		}
		held()
		return l.Release(ctx)
	}},
}

// testEntryPointsWaitHoldsNoSnapshot proves, for every call that waits
// for a busy key, that the wait holds no snapshot for longer than a slice:
// VACUUM removes rows deleted while it waits, and CREATE INDEX
// CONCURRENTLY finishes; and that the key goes to the waiter as soon as it
// is free.
func testEntryPointsWaitHoldsNoSnapshot(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		keys := newPGKeys()
		for _, e := range waitEntryPoints {
			t.Run(e.name, func(t *testing.T) {
				key := keys.nextPair()
				wait := func(ctx context.Context, db *sql.DB, _ pgtest.Key, held func()) error {
					return e.wait(ctx, db, key, held)
				}
				vacuumed, handoff := pgtest.RequireNoSnapshotWait(t, tg, key, pgtest.SnapshotCheck{CIC: e.cic}, wait)
				if handoff > handoffBound {
					t.Errorf("the waiter got the key %v after its release; want within %v", handoff, handoffBound)
				}
				t.Logf("dead rows removed %v after the delete; key handed over %v after its release", vacuumed, handoff)
			})
		}
	})
}

// onConn runs f on a connection of its own from db, and closes it.
func onConn(ctx context.Context, db *sql.DB, f func(*sql.Conn) error) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return f(conn)
}

// inTx runs f in a transaction of db's, which it then commits.
func inTx(ctx context.Context, db *sql.DB, f func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := f(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// testEntryPointsEngine proves that PostgreSQL is identified as itself,
// with its release, and that nothing is refused on it: session and
// transaction locks, both scopes, a lease and a Locker. Through a counting
// proxy it proves what the identification costs: the first lock call on
// a connection pays for the probe, one round trip on lib/pq (on pgx, which
// prepares the statement, up to two), and no later call on it pays
// anything; another connection pays the probe once, at its own first
// lock call, since database/sql cannot say which *sql.DB a *sql.Conn
// came from.
func testEntryPointsEngine(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		keys := newPGKeys()
		p := tg.Server.Proxy(t)
		srv := *tg.Server
		srv.DSN = p.DSN()
		db := srv.Open(t, tg.Driver)
		db.SetMaxOpenConns(4) // two held below, and the calls at the end
		conn := pgtest.Conn(t, db)
		pgtest.PID(t, conn) // the session exists; no lock call has run on db

		// tryOnce returns the round trips of one try and its unlock's,
		// on c.
		tryOnce := func(c *sql.Conn) (try int64) {
			t.Helper()
			k := keys.next()
			p.Reset()
			ok, err := advisory.TryLock(ctx, c, k)
			try = p.Flights()
			if err != nil || !ok {
				t.Fatalf("TryLock on PostgreSQL = %v, %v", ok, err)
			}
			if err := advisory.Unlock(ctx, c, k); err != nil {
				t.Fatal(err)
			}
			return try
		}
		first := tryOnce(conn)
		later := tryOnce(conn)
		if later != 1 {
			t.Errorf("a later TryLock cost %d round trips; want 1", later)
		}
		probe := first - later
		if (tg.Driver == pgtest.DriverPQ && probe != 1) || probe < 1 || probe > 3 {
			// On pgx the first TryLock may also prepare its own
			// statement, one round trip more.
			t.Errorf("the first TryLock cost %d round trips, the probe %d; want 1 on lib/pq, 1 to 3 on pgx", first, probe)
		}
		other := pgtest.Conn(t, db)
		pgtest.PID(t, other)
		if got := tryOnce(other) - 1; got != probe && !(tg.Driver != pgtest.DriverPQ && got >= 1 && got <= 3) {
			t.Errorf("the first TryLock on another connection of the same *sql.DB cost a probe of %d round trips; want %d", got, probe)
		}
		if got := tryOnce(other); got != 1 {
			t.Errorf("a later TryLock on the other connection cost %d round trips; want 1", got)
		}
		t.Logf("%s: first TryLock %d round trips, later ones %d", tg.Driver, first, later)

		e, err := scope.EngineOf(ctx, db, db)
		switch {
		case err != nil:
			t.Fatal(err)
		case e.Name != scope.PostgreSQL || !strings.HasPrefix(e.Version, strconv.Itoa(tg.Server.Version)+"."):
			t.Errorf("engine = %+v; want PostgreSQL %d", e, tg.Server.Version)
		case e.Session != "" || e.Xact != "":
			t.Errorf("engine = %+v; want nothing refused", e)
		}

		// Nothing is refused, on db and on a fresh *sql.DB, whose first
		// lock call, TryXactLock, probes in the caller's transaction.
		fresh := tg.DB
		calls := []struct {
			name string
			run  func(db *sql.DB) error
		}{
			{"TryXactLock", func(db *sql.DB) error {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				defer tx.Rollback()
				_, err = advisory.TryXactLock(ctx, tx, keys.next())
				return err
			}},
			{"WithXactLock", func(db *sql.DB) error {
				return advisory.WithXactLock(ctx, db, keys.next(), func(context.Context, *sql.Tx) error { return nil })
			}},
			{"WithSessionLock", func(db *sql.DB) error {
				return advisory.WithSessionLock(ctx, db, keys.next(), func(context.Context, *sql.Conn) error { return nil })
			}},
			{"Acquire", func(db *sql.DB) error {
				l, err := advisory.Acquire(ctx, db, keys.next(), advisory.Heartbeat(time.Minute))
				if err != nil {
					return err
				}
				return l.Release(ctx)
			}},
			{"Locker", func(db *sql.DB) error {
				lk, err := advisory.NewLocker(db, advisory.LockerConfig{MaxConns: 1, Heartbeat: time.Minute})
				if err != nil {
					return err
				}
				l, err := lk.Acquire(ctx, keys.next(), advisory.Try())
				if err == nil {
					err = l.Release(ctx)
				}
				if cerr := lk.Close(ctx); err == nil {
					err = cerr
				}
				return err
			}},
		}
		for _, c := range calls {
			for _, d := range []*sql.DB{fresh, db} {
				if err := c.run(d); err != nil {
					t.Errorf("%s on PostgreSQL: %v", c.name, err)
				}
			}
		}
		if e, err := scope.EngineOf(ctx, fresh, fresh); err != nil || e.Name != scope.PostgreSQL {
			t.Errorf("engine of a *sql.DB first probed in a transaction = %+v, %v", e, err)
		}
	})
}

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

// testEntryPointsSearchPathShadow: a session whose search_path puts a
// schema of look-alike functions before pg_catalog (shadow, whose
// pg_try_advisory_lock always returns true) still gets the server's
// locks: with a key held by another session, TryLock and TryXactLock
// report false, WithXactLock(Try()) and WithSessionLock(Timeout) do not
// run fn, and Acquire(Try()) reports ErrNotAcquired, not a shared
// session. Unqualified SQL on the same session is fooled, which shows
// that the shadow is in effect.
func testEntryPointsSearchPathShadow(t *testing.T) {
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
