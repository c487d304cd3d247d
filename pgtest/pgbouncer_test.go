package pgtest_test

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pgadvisory/pgadvisory/pgtest"
)

// bouncerKey is the advisory lock key the PgBouncer tests take; the servers
// are shared, and PgBouncer's sessions end when it stops.
const bouncerKey = 7_700_000_001

// conns returns n sessions of db, closed at t's cleanup.
func conns(t *testing.T, db *sql.DB, n int) []*sql.Conn {
	t.Helper()
	cs := make([]*sql.Conn, n)
	for i := range cs {
		c, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		cs[i] = c
	}
	return cs
}

// TestPgBouncerTransactionPooling shows transaction pooling in effect
// through a PgBouncer with a pool of two, on each driver: one client's
// statements run on whichever backend is free, while another client's
// transaction keeps a backend to itself; and a session lock that one client
// takes lets another client take the same key, on the backend they share.
func TestPgBouncerTransactionPooling(t *testing.T) {
	ctx := context.Background()
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		b := tg.Server.PgBouncer(t, 2)
		if want := tg.Server.Name + "-pgbouncer"; b.Name != want || b.Version != tg.Server.Version {
			t.Errorf("PgBouncer server %s, version %d; want %s, %d", b.Name, b.Version, want, tg.Server.Version)
		}
		db := b.Open(t, tg.Driver)
		cs := conns(t, db, 3)
		client, holder := cs[0], cs[1]

		// A transaction keeps its backend; the other client's statements
		// run on the other one meanwhile. When the holder takes the
		// backend the client just used, the client's next statement
		// lands on another backend: its session changed under it.
		backends := make(map[int]bool)
		changed := 0
		for range 20 {
			last := pgtest.PID(t, client)
			tx, err := holder.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			held := pgtest.PID(t, tx)
			for range 3 {
				now := pgtest.PID(t, client)
				if now == held {
					t.Fatalf("client ran on backend %d while a transaction held it", now)
				}
				if now != last {
					changed++
				}
				backends[now] = true
			}
			if again := pgtest.PID(t, tx); again != held {
				t.Fatalf("a transaction moved from backend %d to %d", held, again)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			backends[held] = true
		}
		if len(backends) != 2 {
			t.Errorf("saw %d backends through a pool of 2", len(backends))
		}
		if changed == 0 {
			t.Error("the client's backend never changed: no transaction pooling seen")
		}
		t.Logf("%s: client's backend changed under it %d times of 60", tg.Driver, changed)

		// The silent failure: a session lock stays on the backend, and
		// any client that lands there takes the same key again.
		locker, other := cs[0], cs[2]
		var lockedOn int
		if err := locker.QueryRowContext(ctx, "SELECT pg_backend_pid() FROM (SELECT pg_advisory_lock($1::bigint)) l", int64(bouncerKey)).Scan(&lockedOn); err != nil {
			t.Fatal(err)
		}
		shared := 0
		for range 20 {
			var got bool
			var pid int
			if err := other.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1::bigint), pg_backend_pid()", int64(bouncerKey)).Scan(&got, &pid); err != nil {
				t.Fatal(err)
			}
			if got != (pid == lockedOn) {
				t.Fatalf("try lock on backend %d = %v; the lock is on backend %d", pid, got, lockedOn)
			}
			if got {
				shared++
			}
		}
		if shared == 0 {
			t.Error("no other client ever took the key: the pooler's failure did not show")
		}
		t.Logf("%s: another client took the held key %d times of 20", tg.Driver, shared)
	})
}

// TestPgBouncerDriverParameters checks that each driver works through
// transaction pooling with the parameters Open adds, under contention: 8
// clients on a pool of 2, each running a query of its own with arguments.
// Without them, a statement prepared on one backend is missing, or another
// one, on the next: it logs how many queries failed or answered wrong.
func TestPgBouncerDriverParameters(t *testing.T) {
	ctx := context.Background()
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		b := tg.Server.PgBouncer(t, 2)
		for _, tt := range []struct {
			name string
			open func() *sql.DB
		}{
			{"WithPoolerDSN", func() *sql.DB { return b.Open(t, tg.Driver) }},
			{"PlainDSN", func() *sql.DB {
				return (&pgtest.Server{Name: b.Name, Version: b.Version, DSN: b.DSN}).Open(t, tg.Driver)
			}},
		} {
			db := tt.open()
			db.SetMaxOpenConns(8)
			var failed atomic.Int64
			var first atomic.Value
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					for i := range 50 {
						// Each client its own text, so that a
						// statement of another client is a
						// different one.
						q := "SELECT $1::bigint * " + strconv.Itoa(g+2) + " + $2::bigint"
						var got int64
						err := db.QueryRowContext(ctx, q, int64(i), int64(g)).Scan(&got)
						if err == nil && got != int64(i*(g+2)+g) {
							err = fmt.Errorf("%s with %d, %d = %d", q, i, g, got)
						}
						if err != nil {
							failed.Add(1)
							first.CompareAndSwap(nil, err.Error())
						}
					}
				})
			}
			wg.Wait()
			msg, _ := first.Load().(string)
			t.Logf("%s %s: %d of 400 queries failed %s", tg.Driver, tt.name, failed.Load(), msg)
			if tt.name == "WithPoolerDSN" && failed.Load() != 0 {
				t.Errorf("%s: %d of 400 queries failed through PgBouncer; first: %s", tt.name, failed.Load(), msg)
			}
		}
	})
}

func TestPgBouncerRefusals(t *testing.T) {
	servers := pgtest.Servers(t)
	s := servers[0]
	b := s.PgBouncer(t, 1)
	for name, call := range map[string]func(tb testing.TB){
		"PoolSizeZero":       func(tb testing.TB) { s.PgBouncer(tb, 0) },
		"PgBouncerOfBouncer": func(tb testing.TB) { b.PgBouncer(tb, 1) },
		"Restart":            func(tb testing.TB) { b.Restart(tb) },
		"Pause":              func(tb testing.TB) { b.Pause(tb) },
	} {
		r := &recorder{TB: t}
		r.run(call)
		if r.fatal == "" || !strings.HasPrefix(r.fatal, "pgtest: ") {
			t.Errorf("%s: fatal %q", name, r.fatal)
		}
	}
}

// TestPgBouncerKeepsServingAcrossARestart restarts the dedicated server
// behind a PgBouncer: its clients' sessions end, and the PgBouncer serves
// new statements once the server is back.
func TestPgBouncerKeepsServingAcrossARestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, s := range dedicated(t) {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			db := s.PgBouncer(t, 2).Open(t, pgtest.DriverPGX)
			before := pgtest.PID(t, db)
			s.Restart(t)
			var err error
			for range 10 { // PgBouncer notices its server connections closed when it uses them
				var pid int
				if err = db.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err == nil {
					if pid == before {
						t.Errorf("backend %d after restart, as before", pid)
					}
					return
				}
			}
			t.Fatalf("through PgBouncer after a restart: %v", err)
		})
	}
}
