package pgtest_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/pgadvisory/pgadvisory/pgtest"
)

// TestStandbyFailover runs a dedicated pair through what the failover
// tests do with it: the standby is a hot standby that follows the primary
// and refuses writes; after Cut it misses what the primary commits; after
// Kill the primary answers no more; after Promote the standby accepts
// writes on a new timeline, without what it missed. A multi-host DSN with
// target_session_attrs=read-write reaches the primary before and the
// promoted standby after, on both drivers.
func TestStandbyFailover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, p := range pgtest.StartStandbys(t) {
		t.Run(p.Name, func(t *testing.T) {
			t.Parallel()
			primary := p.Primary.Open(t, pgtest.DriverPGX)
			standby := p.Standby.Open(t, pgtest.DriverPGX)
			if p.Standby.Version != p.Version || p.Primary.Version != p.Version {
				t.Errorf("versions: pair %d, primary %d, standby %d", p.Version, p.Primary.Version, p.Standby.Version)
			}
			if got := recovery(t, primary); got {
				t.Fatal("primary: pg_is_in_recovery() = true")
			}
			if got := recovery(t, standby); !got {
				t.Fatal("standby: pg_is_in_recovery() = false")
			}
			multi := map[string]*sql.DB{}
			for _, d := range pgtest.Drivers {
				multi[d] = p.OpenMultiHost(t, d, "read-write")
				if addr := serverAddr(t, multi[d]); addr != serverAddr(t, primary) {
					t.Errorf("%s: multi-host DSN reached %s, want the primary's %s", d, addr, serverAddr(t, primary))
				}
			}

			pgtest.Exec(t, primary, "CREATE TABLE standby_seen (n int)")
			pgtest.Exec(t, primary, "INSERT INTO standby_seen VALUES (1)")
			p.AwaitReplay(t)
			if n := count(t, standby); n != 1 {
				t.Fatalf("standby: %d rows after AwaitReplay, want 1", n)
			}
			_, err := standby.ExecContext(ctx, "INSERT INTO standby_seen VALUES (2)")
			if err == nil || !strings.Contains(err.Error(), "read-only") {
				t.Errorf("standby: insert = %v, want a read-only error", err)
			}

			p.Cut(t)
			pgtest.Exec(t, primary, "INSERT INTO standby_seen VALUES (3)")
			p.Kill(t)
			if err := primary.PingContext(ctx); err == nil {
				if _, err = primary.ExecContext(ctx, "SELECT 1"); err == nil {
					t.Error("primary answers after Kill")
				}
			}
			var before int64
			if err := standby.QueryRow("SELECT timeline_id FROM pg_catalog.pg_control_checkpoint()").Scan(&before); err != nil {
				t.Fatal(err)
			}
			p.Promote(t)
			if recovery(t, standby) {
				t.Fatal("standby: pg_is_in_recovery() = true after Promote")
			}
			if after := timeline(t, standby); after <= before {
				t.Errorf("timeline %d after Promote, %d before: want it to grow", after, before)
			}
			if n := count(t, standby); n != 1 {
				t.Errorf("promoted standby: %d rows, want 1: the row inserted after Cut is lost", n)
			}
			pgtest.Exec(t, standby, "INSERT INTO standby_seen VALUES (4)")
			for d, db := range multi {
				db.SetMaxIdleConns(0) // every query on a new connection
				if addr := serverAddr(t, db); addr != serverAddr(t, standby) {
					t.Errorf("%s: multi-host DSN reached %s after Promote, want the promoted standby's %s", d, addr, serverAddr(t, standby))
				}
			}
		})
	}
}

func recovery(t *testing.T, db *sql.DB) bool {
	t.Helper()
	var r bool
	if err := db.QueryRow("SELECT pg_catalog.pg_is_in_recovery()").Scan(&r); err != nil {
		t.Fatal(err)
	}
	return r
}

func count(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM standby_seen").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// timeline returns the timeline of a primary's current WAL file, which
// a promotion makes at once; pg_control_checkpoint tells it only after the
// checkpoint that follows.
func timeline(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	var tl int64
	q := "SELECT ('x' || pg_catalog.substr(pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_lsn()), 1, 8))::pg_catalog.bit(32)::pg_catalog.int8"
	if err := db.QueryRow(q).Scan(&tl); err != nil {
		t.Fatal(err)
	}
	return tl
}

// serverAddr tells the servers of a pair apart: the address of the
// server behind db on its Docker network, one per container. (The system
// identifier is the same on both, copied by the base backup, and the port
// inside each container is 5432.)
func serverAddr(t *testing.T, db *sql.DB) string {
	t.Helper()
	var addr string
	if err := db.QueryRow("SELECT pg_catalog.host(pg_catalog.inet_server_addr())").Scan(&addr); err != nil {
		t.Fatal(err)
	}
	return addr
}
