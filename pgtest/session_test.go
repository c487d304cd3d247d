package pgtest_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/pgtest"
)

func TestNewDatabase(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		ctx := context.Background()
		var name string
		t.Run("Own", func(t *testing.T) {
			own := pgtest.NewDatabase(t, tg, "pgtest-own")
			var outer, app string
			if err := own.DB.QueryRowContext(ctx, "SELECT current_database(), current_setting('application_name')").Scan(&name, &app); err != nil {
				t.Fatal(err)
			}
			if err := tg.DB.QueryRowContext(ctx, "SELECT current_database()").Scan(&outer); err != nil {
				t.Fatal(err)
			}
			if name == outer || !strings.HasPrefix(name, "pgadvisory_t_") {
				t.Errorf("database = %q, outside it %q; want a new pgadvisory_t_ one", name, outer)
			}
			if app != "pgtest-own" {
				t.Errorf("application_name = %q, want pgtest-own", app)
			}
			if own.Driver != tg.Driver || own.Server.Name != tg.Server.Name {
				t.Errorf("moved to %s/%s, want %s/%s", own.Server.Name, own.Driver, tg.Server.Name, tg.Driver)
			}
		})
		var n int
		if err := tg.DB.QueryRowContext(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("database %s still there after the subtest", name)
		}
	})
}

func TestSessionHelpers(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		ctx := context.Background()
		if a, b := pgtest.UniqueName("x_"), pgtest.UniqueName("x_"); a == b || !strings.HasPrefix(a, "x_") || len(a) != len("x_")+12 {
			t.Errorf("UniqueName: %q, %q", a, b)
		}

		app := pgtest.UniqueName("pgtest-")
		db := pgtest.OpenApp(t, tg, app)
		conn := pgtest.Conn(t, db)
		pid := pgtest.PID(t, conn)
		var n int
		if err := tg.DB.QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND application_name = $2", pid, app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("backend %d is not named %s", pid, app)
		}

		pgtest.RequireNoLocks(t, tg.DB, pid)
		pgtest.Exec(t, conn, "SELECT pg_advisory_lock($1::bigint)", int64(-7))
		pgtest.Exec(t, conn, "SELECT pg_advisory_lock_shared(3, 4)")
		locks, err := pgtest.LocksOfPID(ctx, tg.DB, pid)
		if err != nil {
			t.Fatal(err)
		}
		if len(locks) != 2 || locks[0].PID != pid || !locks[0].Granted {
			t.Errorf("LocksOfPID = %v, want two granted locks of %d", locks, pid)
		}
		shared := 0
		for _, l := range locks {
			if l.Shared {
				shared++
			}
		}
		if shared != 1 {
			t.Errorf("LocksOfPID = %v, want one shared", locks)
		}
		pgtest.Exec(t, conn, "SELECT pg_advisory_unlock_all()")
		pgtest.RequireNoLocks(t, tg.DB, pid)

		st := pgtest.OpenSetting(t, tg, "statement_timeout", "200ms")
		held, err := st.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		if err := held.QueryRowContext(ctx, "SHOW statement_timeout").Scan(&got); err != nil || got != "200ms" {
			t.Errorf("statement_timeout = %q, %v; want 200ms", got, err)
		}
		go func() {
			time.Sleep(20 * time.Millisecond)
			held.Close()
		}()
		pgtest.AwaitIdle(t, st)

		// WithDSN leaves tg's server alone.
		dsn := tg.Server.DSN
		other := tg.Server.WithDSN(t, func(u *url.URL) { pgtest.SetParam(u, "application_name", "pgtest-other") })
		if tg.Server.DSN != dsn || !strings.Contains(other.DSN, "application_name=pgtest-other") {
			t.Errorf("WithDSN: DSN %q, copy's %q", tg.Server.DSN, other.DSN)
		}
	})
}
