package advisory_test

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/scope"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// TestEngineIntegration proves that PostgreSQL is identified as itself,
// with its release, and that nothing is refused on it: session and
// transaction locks, both scopes, a lease and a Locker. Through a counting
// proxy it proves what the identification costs: the first lock call on
// a connection pays for the probe, one round trip on lib/pq (on pgx, which
// prepares the statement, up to two), and no later call on it pays
// anything; another connection pays the probe once, at its own first
// lock call, since database/sql cannot say which *sql.DB a *sql.Conn
// came from.
func TestEngineIntegration(t *testing.T) {
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
