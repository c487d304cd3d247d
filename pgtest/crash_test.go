package pgtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/pgtest"
)

func TestRefusesSharedServerCrash(t *testing.T) {
	plain := &pgtest.Server{Name: "pg17", DSN: "postgres://postgres@127.0.0.1:1/postgres"}
	r := &recorder{TB: t}
	r.run(func(tb testing.TB) { plain.Crash(tb) })
	if want := "only a dedicated server from StartServer"; !strings.Contains(r.fatal, want) {
		t.Errorf("Crash of a shared server: fatal %q, want it to say %q", r.fatal, want)
	}
}

// TestCrash checks that Crash is a crash, not a shutdown: PostgreSQL keeps
// its cumulative statistics across a clean restart and discards them after
// crash recovery. Sessions and their locks end, and the DSN stays.
func TestCrash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, s := range dedicated(t) {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			dsn := s.DSN
			db := s.Open(t, pgtest.DriverPGX)
			pgtest.Exec(t, db, "CREATE TABLE crash_probe (i int)")
			// scans scans the table once more and returns how many
			// scans the statistics count.
			scans := func() int64 {
				t.Helper()
				pgtest.Exec(t, db, "SELECT pg_catalog.count(*) FROM crash_probe")
				var n int64
				if err := db.QueryRowContext(ctx, "SELECT pg_catalog.pg_stat_force_next_flush()").Scan(new(string)); err != nil {
					t.Fatal(err)
				}
				if err := db.QueryRowContext(ctx, "SELECT seq_scan FROM pg_catalog.pg_stat_user_tables WHERE relname = 'crash_probe'").Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			scans()
			if n := scans(); n < 2 {
				t.Fatalf("seq_scan %d after two scans", n)
			}
			s.Restart(t)
			db = s.Open(t, pgtest.DriverPGX) // the pool's sessions ended
			if n := scans(); n < 3 {
				t.Errorf("seq_scan %d after a clean restart; want the statistics kept", n)
			}

			conn := pgtest.Conn(t, db)
			pgtest.Exec(t, conn, "SELECT pg_catalog.pg_advisory_lock(42)")
			var started time.Time
			if err := db.QueryRowContext(ctx, "SELECT pg_catalog.pg_postmaster_start_time()").Scan(&started); err != nil {
				t.Fatal(err)
			}
			s.Crash(t)
			if s.DSN != dsn {
				t.Errorf("DSN %s after the crash, was %s", s.DSN, dsn)
			}
			if _, err := conn.ExecContext(ctx, "SELECT 1"); err == nil {
				t.Error("a session from before the crash still answers")
			}
			db = s.Open(t, pgtest.DriverPGX)
			var after time.Time
			if err := db.QueryRowContext(ctx, "SELECT pg_catalog.pg_postmaster_start_time()").Scan(&after); err != nil {
				t.Fatalf("after the crash: %v", err)
			}
			if !after.After(started) {
				t.Errorf("postmaster start time %v after the crash, was %v", after, started)
			}
			if n := scans(); n != 1 {
				t.Errorf("seq_scan %d after the crash; want 1, the statistics discarded by crash recovery", n)
			}
			var held bool
			if err := db.QueryRowContext(ctx, "SELECT pg_catalog.pg_try_advisory_lock(42)").Scan(&held); err != nil {
				t.Fatal(err)
			}
			if !held {
				t.Error("the advisory lock outlived the crash")
			}
		})
	}
}
