package pgtest_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/pgtest"
)

// ciImages is the image list that ci/test.sh sets.
const ciImages = "pgadvisory/postgres:15,pgadvisory/postgres:17"

func TestEachRunsEveryServerAndDriver(t *testing.T) {
	var ran []string
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		ran = append(ran, tg.Server.Name+"/"+tg.Driver)
		var one int
		if err := tg.DB.QueryRowContext(context.Background(), "SELECT 1").Scan(&one); err != nil {
			t.Fatal(err)
		}
		if one != 1 {
			t.Fatalf("SELECT 1 = %d", one)
		}
	})
	var want []string
	for _, s := range pgtest.Servers(t) {
		for _, d := range pgtest.Drivers {
			want = append(want, s.Name+"/"+d)
		}
	}
	if !slices.Equal(ran, want) {
		t.Errorf("ran %q, want %q", ran, want)
	}
}

func TestServerVersions(t *testing.T) {
	servers := pgtest.Servers(t)
	var got []int
	for _, s := range servers {
		got = append(got, s.Version)
		var num int
		if err := s.Open(t, pgtest.DriverPGX).QueryRow("SELECT current_setting('server_version_num')::int").Scan(&num); err != nil {
			t.Fatal(err)
		}
		if num/10000 != s.Version {
			t.Errorf("%s: Version = %d, server_version_num = %d", s.Name, s.Version, num)
		}
	}
	if os.Getenv("PGADVISORY_TEST_DSN") == "" && os.Getenv("PGADVISORY_TEST_IMAGES") == ciImages &&
		!slices.Equal(got, []int{15, 17}) {
		t.Errorf("versions = %v, want [15 17] from %s", got, ciImages)
	}
	names := make(map[string]bool)
	for _, s := range servers {
		if names[s.Name] {
			t.Errorf("two servers named %q", s.Name)
		}
		names[s.Name] = true
	}
}

func TestProxyCountsFlights(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		driver string
		onConn bool // measure on a *sql.Conn rather than the *sql.DB
		call   func(db pgtest.Querier) error
		want   int64
	}{
		{
			name:   "PQExecWithoutArgs",
			driver: pgtest.DriverPQ,
			call: func(db pgtest.Querier) error {
				_, err := db.ExecContext(ctx, "SELECT 1")
				return err
			},
			want: 1, // simple query protocol
		},
		{
			name:   "PQQueryWithArg",
			driver: pgtest.DriverPQ,
			call: func(db pgtest.Querier) error {
				var x int
				return db.QueryRowContext(ctx, "SELECT $1::int", 1).Scan(&x)
			},
			want: 2, // Parse/Describe/Sync, then Bind/Execute/Sync
		},
		{
			// On a *sql.DB, pgx stdlib pings a connection that it
			// takes from the pool after more than a second idle, and
			// on its first reuse; a *sql.Conn is never reset.
			name:   "PGXCachedQueryWithArg",
			driver: pgtest.DriverPGX,
			onConn: true,
			call: func(db pgtest.Querier) error {
				var x int
				return db.QueryRowContext(ctx, "SELECT $1::int", 1).Scan(&x)
			},
			want: 1, // the warm-up prepared and cached the statement
		},
	}
	for _, s := range pgtest.Servers(t) {
		for _, tt := range tests {
			t.Run(s.Name+"/"+tt.name, func(t *testing.T) {
				p := s.Proxy(t)
				db := (&pgtest.Server{Name: s.Name, Version: s.Version, DSN: p.DSN()}).Open(t, tt.driver)
				db.SetMaxOpenConns(1)
				var c pgtest.Querier = db
				if tt.onConn {
					conn, err := db.Conn(ctx)
					if err != nil {
						t.Fatal(err)
					}
					defer conn.Close()
					c = conn
				}
				if err := tt.call(c); err != nil { // warm-up
					t.Fatal(err)
				}
				for range 3 {
					p.Reset()
					if err := tt.call(c); err != nil {
						t.Fatal(err)
					}
					if got := p.Flights(); got != tt.want {
						t.Fatalf("Flights() = %d, want %d", got, tt.want)
					}
				}
			})
		}
	}
}

func TestStartServerWithSettings(t *testing.T) {
	t.Parallel()
	servers := pgtest.StartServer(t, "-c", "max_locks_per_transaction=10")
	if servers == nil {
		t.Skip("PGADVISORY_TEST_DSN names existing servers; the harness cannot start one")
	}
	shared := pgtest.Servers(t)
	if len(servers) != len(shared) {
		t.Errorf("StartServer gave %d servers, Servers %d", len(servers), len(shared))
	}
	for _, s := range servers {
		var v string
		if err := s.Open(t, pgtest.DriverPQ).QueryRow("SHOW max_locks_per_transaction").Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v != "10" {
			t.Errorf("%s: max_locks_per_transaction = %s, want 10", s.Name, v)
		}
		for _, o := range shared {
			if o.DSN == s.DSN {
				t.Errorf("%s: StartServer returned a shared server", s.Name)
			}
		}
	}
}

func TestStartServerReportsTheServerOutput(t *testing.T) {
	t.Parallel()
	if os.Getenv("PGADVISORY_TEST_DSN") != "" {
		t.Skip("PGADVISORY_TEST_DSN names existing servers; the harness cannot start one")
	}
	pgtest.Servers(t) // skips here when there is no way to start one
	r := &recorder{TB: t}
	r.run(func(tb testing.TB) { pgtest.StartServer(tb, "-c", "no_such_setting=1") })
	msg := r.fatal + r.skip
	if msg == "" {
		t.Fatal("StartServer with a bad setting reported nothing")
	}
	if !strings.Contains(msg, "no_such_setting") {
		t.Errorf("the report does not show the server's complaint:\n%s", msg)
	}
	if os.Getenv("CI") == "true" && r.fatal == "" {
		t.Errorf("under CI=true the failure was a skip: %s", r.skip)
	}
}

func TestDriverPGXCancelKeepsTheSession(t *testing.T) {
	drivers := []string{pgtest.DriverPGX, pgtest.DriverPGXCancel}
	pgtest.EachDriver(t, drivers, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		conn, err := tg.DB.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var before, after int
		if err := conn.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&before); err != nil {
			t.Fatal(err)
		}
		sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		_, err = conn.ExecContext(sctx, "SELECT pg_sleep(10)")
		cancel()
		if err == nil {
			t.Fatal("pg_sleep(10) returned before the context's deadline")
		}
		err = conn.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&after)
		switch tg.Driver {
		case pgtest.DriverPGXCancel:
			if err != nil {
				t.Fatalf("session after cancel: %v", err)
			}
			if after != before {
				t.Errorf("backend pid %d after cancel, want %d: the session was not kept", after, before)
			}
		case pgtest.DriverPGX:
			if err == nil {
				t.Errorf("query on the conn after cancel succeeded on backend %d (was %d); want the connection closed", after, before)
			}
		}
	})
}

func TestOpenUnknownDriver(t *testing.T) {
	s := &pgtest.Server{Name: "none", DSN: "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable"}
	if _, err := s.OpenDB("mysql"); err == nil {
		t.Error("OpenDB(mysql) succeeded")
	}
	for _, d := range []string{pgtest.DriverPQ, pgtest.DriverPGX, pgtest.DriverPGXCancel} {
		db, err := s.OpenDB(d)
		if err != nil {
			t.Errorf("OpenDB(%s): %v", d, err)
			continue
		}
		db.Close()
	}
}

func TestLaunch(t *testing.T) {
	if testing.Short() {
		t.Skip("Launch starts a server; skipped under -short")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dsn, stop, err := pgtest.Launch(ctx)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	s := &pgtest.Server{Name: "launched", DSN: dsn}
	db, err := s.OpenDB(pgtest.DriverPQ)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxIdleConns(0)
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("ping %s: %v", dsn, err)
	}
	stop()
	stop() // a second call does nothing
	if os.Getenv("DATABASE_URL") != "" || os.Getenv("PGADVISORY_TEST_DSN") != "" {
		return // Launch started nothing
	}
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	defer pcancel()
	if err := db.PingContext(pctx); err == nil {
		t.Error("the server still answers after stop")
	} else if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ping after stop hung: %v", err)
	}
}
