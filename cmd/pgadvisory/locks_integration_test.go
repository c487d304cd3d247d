package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/keyspace"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// session opens a session named app and returns it with its backend PID.
func session(t *testing.T, db *sql.DB, app string) (*sql.Conn, int) {
	t.Helper()
	ctx := testContext(t)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Raw(func(any) error { return nil }); conn.Close() })
	var pid int
	if err := conn.QueryRowContext(ctx, `SELECT pg_backend_pid() FROM set_config('application_name', $1, false)`, app).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return conn, pid
}

// TestLocksAndRelease sets up a known set of locks: an exclusive holder,
// a shared holder of a key in a namespace the dictionary table names, and a
// waiter blocked by the first. locks must report exactly these, as a table
// and as JSON; release must refuse without --force, then end the holder.
func TestLocksAndRelease(t *testing.T) {
	servers(t, func(t *testing.T, s *pgtest.Server) {
		ctx := testContext(t)
		db := s.Open(t, pgtest.DriverPGX)
		var reg keyspace.Registry
		ns := reg.MustRegister(advisory.Namespace{ID: 4343, Name: "clitest", Owner: "cmd/pgadvisory tests"})
		if err := reg.Sync(ctx, db, keyspace.RegisteredBy("cmd/pgadvisory tests")); err != nil {
			t.Fatal(err)
		}
		bigint, named := advisory.Int64Key(7001), ns.NameKey("nightly")

		holder, holderPID := session(t, db, "cli-test-holder")
		if err := advisory.Lock(ctx, holder, bigint); err != nil {
			t.Fatal(err)
		}
		sharer, sharerPID := session(t, db, "cli-test-sharer")
		if err := advisory.LockShared(ctx, sharer, named); err != nil {
			t.Fatal(err)
		}
		waiter, waiterPID := session(t, db, "cli-test-waiter")
		waitCtx, stopWaiting := context.WithCancel(ctx)
		waited := make(chan error, 1)
		go func() { waited <- advisory.Lock(waitCtx, waiter, bigint) }()
		t.Cleanup(func() { stopWaiting(); <-waited })
		pgtest.AwaitWaiting(t, db, bigint)

		type want struct {
			key, namespace, mode, state string
			pid                         int
			app                         string
			blockedBy                   []int
		}
		wants := []want{
			{bigint.String(), "", "exclusive", "held", holderPID, "cli-test-holder", nil},
			{bigint.String(), "", "exclusive", "waiting", waiterPID, "cli-test-waiter", []int{holderPID}},
			{named.String(), "clitest", "shared", "held", sharerPID, "cli-test-sharer", nil},
		}
		ours := func(pid int) bool { return pid == holderPID || pid == sharerPID || pid == waiterPID }
		env := cliEnv("DATABASE_URL=" + s.DSN)

		t.Run("JSON", func(t *testing.T) {
			r := runCLI(t, env, "locks", "--json")
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			var got []jsonLock
			if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
				t.Fatalf("%v\n%s", err, r.stdout)
			}
			got = slices.DeleteFunc(got, func(l jsonLock) bool { return !ours(l.PID) })
			if len(got) != len(wants) {
				t.Fatalf("got %d locks of the test's sessions, want %d:\n%s", len(got), len(wants), r.stdout)
			}
			for i, w := range wants {
				g := got[i]
				state := map[bool]string{true: "held", false: "waiting"}[g.Granted]
				if g.Key != w.key || g.Namespace != w.namespace || g.Mode != w.mode || state != w.state ||
					g.PID != w.pid || g.ApplicationName != w.app || !slices.Equal(g.BlockedBy, w.blockedBy) {
					t.Errorf("lock %d: got %+v, want %+v", i, g, w)
				}
				if g.User == "" || g.Database == "" {
					t.Errorf("lock %d: no user or database: %+v", i, g)
				}
			}
			if got[0].Bigint == nil || *got[0].Bigint != 7001 {
				t.Errorf("bigint key not decoded: %+v", got[0])
			}
			if a, b, _ := named.Pair(); !slices.Equal(got[2].Pair, []int32{a, b}) {
				t.Errorf("pair key not decoded: %v, want %d:%d", got[2].Pair, a, b)
			}
		})

		t.Run("Table", func(t *testing.T) {
			r := runCLI(t, env, "locks")
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			lines := strings.Split(r.stdout, "\n")
			if h := strings.Fields(lines[0]); !slices.Equal(h, strings.Fields("KEY NAMESPACE MODE STATE PID APPLICATION USER SESSION AGE BLOCKED BY")) {
				t.Fatalf("header %q", lines[0])
			}
			var rows [][]string
			for _, line := range lines[1:] {
				f := strings.Fields(line)
				if len(f) == 10 {
					if pid, err := strconv.Atoi(f[4]); err == nil && ours(pid) {
						rows = append(rows, f)
					}
				}
			}
			if len(rows) != len(wants) {
				t.Fatalf("got %d rows of the test's sessions, want %d:\n%s", len(rows), len(wants), r.stdout)
			}
			for i, w := range wants {
				ns := w.namespace
				if ns == "" {
					ns = "-"
				}
				blocked := "-"
				if w.blockedBy != nil {
					blocked = pids(w.blockedBy)
				}
				want := []string{w.key, ns, w.mode, w.state, strconv.Itoa(w.pid), w.app}
				if got := rows[i]; !slices.Equal(got[:6], want) || got[9] != blocked {
					t.Errorf("row %d: got %q, want %q ... %s", i, got, want, blocked)
				}
			}
			graph := "pid " + strconv.Itoa(holderPID) + " (cli-test-holder): holds exclusive 7001"
			if !strings.Contains(r.stdout, graph) || !strings.Contains(r.stdout, "blocks pid "+strconv.Itoa(waiterPID)) {
				t.Errorf("no wait graph with %q:\n%s", graph, r.stdout)
			}
		})

		t.Run("KeyByNamespaceName", func(t *testing.T) {
			// The key command reads a namespace's name from the
			// dictionary table; the rest follows advisory.ParseKey.
			r := runCLI(t, env, "key", "clitest:nightly", "clitest:12", `clitest:"2024"`)
			if r.code != 0 {
				t.Fatalf("exit %d\nstderr: %s", r.code, r.stderr)
			}
			for _, k := range []advisory.Key{named, advisory.PairKey(4343, 12), ns.NameKey("2024")} {
				if !strings.Contains(r.stdout, "  key     "+k.String()+"  ") {
					t.Errorf("no key %v in:\n%s", k, r.stdout)
				}
			}
			r = runCLI(t, env, "key", "nosuchnamespace:nightly")
			if r.code != exitUsage || !strings.HasSuffix(r.stderr, `no namespace is named "nosuchnamespace" in the dictionary table pgadvisory.namespaces`+"\n") {
				t.Errorf("an unknown namespace: exit %d, want %d\nstderr: %s", r.code, exitUsage, r.stderr)
			}
			r = runCLI(t, env, "exec", "nosuchnamespace:nightly", "--", "true")
			if r.code != exitUsage || !strings.Contains(r.stderr, `no namespace is named "nosuchnamespace"`) {
				t.Errorf("exec with an unknown namespace: exit %d, want %d\nstderr: %s", r.code, exitUsage, r.stderr)
			}
		})

		t.Run("Release", func(t *testing.T) {
			pid := strconv.Itoa(holderPID)
			r := runCLI(t, env, "release", "--pid", pid)
			if r.code != exitUsage || !strings.Contains(r.stderr, "without --force") || !strings.Contains(r.stderr, "holds exclusive 7001") {
				t.Fatalf("without --force: exit %d, want 2 and a refusal\nstderr: %s", r.code, r.stderr)
			}
			if locks, _ := pgtest.LocksOf(ctx, db, bigint); !slices.ContainsFunc(locks, func(l pgtest.Lock) bool { return l.PID == holderPID && l.Granted }) {
				t.Fatalf("the refusal ended the holder: %v", locks)
			}
			r = runCLI(t, env, "release", "--pid", pid, "--force")
			if r.code != 0 || !strings.Contains(r.stdout, "ended pid "+pid) || !strings.Contains(r.stdout, "holds exclusive 7001") {
				t.Fatalf("with --force: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			}
			pgtest.AwaitGone(t, db, holderPID)
			if err := <-waited; err != nil {
				t.Fatalf("the waiter did not get the lock: %v", err)
			}
			waited <- nil
			r = runCLI(t, env, "release", "-p", pid, "-f")
			if r.code != 1 || !strings.Contains(r.stderr, "nothing ended") {
				t.Errorf("a gone pid: exit %d, want 1\nstderr: %s", r.code, r.stderr)
			}
		})
	})
}
