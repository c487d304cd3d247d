package pgtest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/pgtest"
)

// dedicated starts dedicated servers with args, skipping when the harness
// cannot start any.
func dedicated(t *testing.T, args ...string) []*pgtest.Server {
	t.Helper()
	servers := pgtest.StartServer(t, args...)
	if servers == nil {
		t.Skip("PGADVISORY_TEST_DSN names existing servers; the harness cannot start one")
	}
	return servers
}

// TestRefusesSharedServers checks that only dedicated servers may be
// restarted or paused; it needs no server.
func TestRefusesSharedServers(t *testing.T) {
	plain := &pgtest.Server{Name: "pg17", DSN: "postgres://postgres@127.0.0.1:1/postgres"}
	for _, tt := range []struct {
		name string
		call func(tb testing.TB)
		want string
	}{
		{"Restart", func(tb testing.TB) { plain.Restart(tb) }, "only a dedicated server from StartServer"},
		{"Pause", func(tb testing.TB) { plain.Pause(tb) }, "only a dedicated server from StartServer"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := &recorder{TB: t}
			r.run(tt.call)
			if !strings.Contains(r.fatal, tt.want) {
				t.Errorf("%s of a shared server: fatal %q, want it to say %q", tt.name, r.fatal, tt.want)
			}
		})
	}
}

func TestSharedServersRefuseRestartAndPause(t *testing.T) {
	for _, s := range pgtest.Servers(t) {
		for name, call := range map[string]func(tb testing.TB){
			"Restart": func(tb testing.TB) { s.Restart(tb) },
			"Pause":   func(tb testing.TB) { s.Pause(tb) },
		} {
			r := &recorder{TB: t}
			r.run(call)
			if !strings.Contains(r.fatal, "never a shared one") {
				t.Errorf("%s of shared %s: fatal %q", name, s.Name, r.fatal)
			}
		}
	}
}

func TestRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, s := range dedicated(t) {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			dsn := s.DSN
			db := s.Open(t, pgtest.DriverPGX)
			conn, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock(42)"); err != nil {
				t.Fatal(err)
			}
			var started time.Time
			if err := db.QueryRowContext(ctx, "SELECT pg_postmaster_start_time()").Scan(&started); err != nil {
				t.Fatal(err)
			}

			s.Restart(t)

			if s.DSN != dsn {
				t.Errorf("DSN %s after restart, was %s", s.DSN, dsn)
			}
			if _, err := conn.ExecContext(ctx, "SELECT 1"); err == nil {
				t.Error("a session from before the restart still answers")
			}
			// The pool's idle sessions ended too; a new pool has none.
			db = s.Open(t, pgtest.DriverPGX)
			var after time.Time
			if err := db.QueryRowContext(ctx, "SELECT pg_postmaster_start_time()").Scan(&after); err != nil {
				t.Fatalf("after restart: %v", err)
			}
			if !after.After(started) {
				t.Errorf("postmaster start time %v after restart, was %v", after, started)
			}
			var held bool
			if err := db.QueryRowContext(ctx, "SELECT pg_try_advisory_lock(42)").Scan(&held); err != nil {
				t.Fatal(err)
			}
			if !held {
				t.Error("the advisory lock outlived the restart")
			}
			s.Restart(t) // a second time, with the port kept again
		})
	}
}

func TestPause(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, s := range dedicated(t) {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			db := s.Open(t, pgtest.DriverPGX)
			conn, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			before := pgtest.PID(t, conn)

			unpause := s.Pause(t)
			r := &recorder{TB: t}
			r.run(func(tb testing.TB) { s.Pause(tb) })
			if !strings.Contains(r.fatal, "paused") {
				t.Errorf("Pause of a paused server: fatal %q", r.fatal)
			}
			r = &recorder{TB: t}
			r.run(func(tb testing.TB) { s.Restart(tb) })
			if !strings.Contains(r.fatal, "paused") {
				t.Errorf("Restart of a paused server: fatal %q", r.fatal)
			}

			// A new session gets no answer: pgx gives up at the
			// deadline and drops the connection.
			other := s.Open(t, pgtest.DriverPGX)
			qctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			var one int
			err = other.QueryRowContext(qctx, "SELECT 1").Scan(&one)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("query on a paused server: %v, want context.DeadlineExceeded", err)
			}

			unpause()
			unpause() // a second call does nothing
			if after := pgtest.PID(t, conn); after != before {
				t.Errorf("backend %d after unpause, was %d: the session did not survive the pause", after, before)
			}
		})
	}
}

func TestStartServerIdleSessionTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, s := range dedicated(t, "-c", "idle_session_timeout=300ms") {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			db := s.Open(t, pgtest.DriverPQ)
			conn, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			var v string
			if err := conn.QueryRowContext(ctx, "SHOW idle_session_timeout").Scan(&v); err != nil {
				t.Fatal(err)
			}
			if v != "300ms" {
				t.Errorf("idle_session_timeout = %s, want 300ms", v)
			}
			time.Sleep(time.Second) // idle past the timeout
			if _, err := conn.ExecContext(ctx, "SELECT 1"); err == nil {
				t.Error("a session idle past idle_session_timeout still answers")
			}
		})
	}
}
