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

// Integration tests of a stale mark: a lease's mark left on a backend
// that holds no lock, as a release that failed after its unlock ran
// leaves it. A lock call refused for it removes it and goes on; a mark
// beside a lock, as a live lease's is, still refuses.

// staleMark is the mark the tests leave on a session.
const staleMark = "SELECT pg_catalog.set_config('pgadvisory.lease', '424242', false)"

// markOf returns the mark on q's session, "" when it bears none.
func markOf(t *testing.T, q interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}) string {
	t.Helper()
	var mark sql.NullString
	if err := q.QueryRowContext(context.Background(), "SELECT pg_catalog.current_setting('pgadvisory.lease', true)").Scan(&mark); err != nil {
		t.Fatal(err)
	}
	return mark.String
}

// testStaleMark runs every entry point that takes a lock on a session of
// its own, or on the caller's, on a session that bears a stale mark: each
// takes its lock, and the mark is gone. On a session whose mark sits
// beside a lock, each is refused with ErrSharedSession, takes nothing,
// and the mark stays.
func testStaleMark(t *testing.T) {
	type call struct {
		name string
		// take takes key on conn, or on db, whose one connection is
		// conn's, and reports whether it took it and released it.
		take func(ctx context.Context, db *sql.DB, conn *sql.Conn, key advisory.Key) error
	}
	calls := []call{
		{"TryLock", func(ctx context.Context, _ *sql.DB, conn *sql.Conn, key advisory.Key) error {
			ok, err := advisory.TryLock(ctx, conn, key)
			if err == nil && !ok {
				return advisory.ErrNotAcquired
			}
			if err == nil {
				err = advisory.Unlock(ctx, conn, key)
			}
			return err
		}},
		{"Lock", func(ctx context.Context, _ *sql.DB, conn *sql.Conn, key advisory.Key) error {
			err := advisory.Lock(ctx, conn, key)
			if err == nil {
				err = advisory.Unlock(ctx, conn, key)
			}
			return err
		}},
		{"WithXactLock", func(ctx context.Context, db *sql.DB, _ *sql.Conn, key advisory.Key) error {
			runs := 0
			err := advisory.WithXactLock(ctx, db, key, func(context.Context, *sql.Tx) error {
				runs++
				return nil
			}, advisory.Try())
			if err == nil && runs != 1 {
				return fmt.Errorf("fn ran %d times", runs)
			}
			return err
		}},
		{"WithSessionLock", func(ctx context.Context, db *sql.DB, _ *sql.Conn, key advisory.Key) error {
			return advisory.WithSessionLock(ctx, db, key, func(context.Context, *sql.Conn) error { return nil }, advisory.Try())
		}},
		{"Acquire", func(ctx context.Context, db *sql.DB, _ *sql.Conn, key advisory.Key) error {
			l, err := advisory.Acquire(ctx, db, key, advisory.Try())
			if err == nil {
				err = l.Release(ctx)
			}
			return err
		}},
	}
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		keys := newPGKeys()
		direct := tg.Server.Open(t, pgtest.DriverPQ)
		// One connection, so that the scopes that take their own get
		// the one that bears the mark.
		tg.DB.SetMaxOpenConns(1)
		for _, c := range calls {
			onConn := c.name == "TryLock" || c.name == "Lock"
			for _, live := range []bool{false, true} {
				key := keys.next()
				conn := pgtest.Conn(t, tg.DB)
				if live {
					// A lock beside the mark, as a lease's.
					if err := advisory.Lock(ctx, conn, keys.next()); err != nil {
						t.Fatal(err)
					}
				}
				pgtest.Exec(t, conn, staleMark)
				var err error
				if onConn {
					err = c.take(ctx, tg.DB, conn, key)
				} else {
					_ = conn.Close()
					err = c.take(ctx, tg.DB, nil, key)
					conn = pgtest.Conn(t, tg.DB)
				}
				mark := markOf(t, conn)
				switch {
				case !live && err != nil:
					t.Errorf("%s on a session with a stale mark: %v; want the lock", c.name, err)
				case !live && mark != "":
					t.Errorf("%s on a session with a stale mark left the mark %q; want none", c.name, mark)
				case live && !errors.Is(err, advisory.ErrSharedSession):
					t.Errorf("%s on a session whose mark sits beside a lock: %v; want ErrSharedSession", c.name, err)
				case live && onConn && mark != "424242":
					t.Errorf("%s on a session whose mark sits beside a lock left the mark %q; want it kept", c.name, mark)
				}
				if locks, err := pgtest.LocksOf(ctx, direct, key); err != nil || len(locks) > 0 {
					t.Errorf("%s: after the call, %s is held: %v (%v)", c.name, key, locks, err)
				}
				pgtest.Exec(t, conn, "SELECT pg_catalog.pg_advisory_unlock_all(), pg_catalog.set_config('pgadvisory.lease', '', false)")
				_ = conn.Close()
			}
		}
	})
}

func TestStaleMarkIntegration(t *testing.T) { testStaleMark(t) }

// TestStaleMarkPoolerIntegration leaves a stale mark on the one backend
// of a PgBouncer pool in transaction mode, where it would refuse every
// lock call until PgBouncer closed it: a transaction scope through the
// pooler removes it and runs fn once, and so does the next.
func TestStaleMarkPoolerIntegration(t *testing.T) {
	for _, srv := range pgtest.Servers(t) {
		for _, d := range pgtest.Drivers {
			t.Run(srv.Name+"/"+d, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				db := srv.PgBouncer(t, 1).Open(t, d)
				keys := newPGKeys()
				for i := range 3 {
					if _, err := db.ExecContext(ctx, staleMark); err != nil {
						t.Fatal(err)
					}
					runs := 0
					err := advisory.WithXactLock(ctx, db, keys.next(), func(context.Context, *sql.Tx) error {
						runs++
						return nil
					}, advisory.Try())
					if err != nil || runs != 1 {
						t.Errorf("scope %d on a pooled backend with a stale mark: %v, fn ran %d times; want nil, once", i, err, runs)
					}
					if mark := markOf(t, db); mark != "" {
						t.Errorf("scope %d: the pooled backend bears %q after it; want no mark", i, mark)
					}
				}
			})
		}
	}
}
