package pgxlock_test

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// What the integration tests share. They run on every server of
// pgtest.Servers (PostgreSQL 15 and 17 on CI), on pgx pools of their own
// built from the server's DSN; pg_locks is read through a database/sql
// pool on lib/pq, which shares nothing with the pools under test.

// eachServer runs f in a parallel subtest per server, named "pg15",
// "pg17", with an observer pool on it.
func eachServer(t *testing.T, f func(t *testing.T, s *pgtest.Server, obs *sql.DB)) {
	t.Helper()
	for _, s := range pgtest.Servers(t) {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			f(t, s, s.Open(t, pgtest.DriverPQ))
		})
	}
}

// newPool opens a pool on dsn, after edit (which may be nil) has changed
// its configuration. It closes at t's cleanup.
func newPool(tb testing.TB, dsn string, edit func(*pgxpool.Config)) *pgxpool.Pool {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	if edit != nil {
		edit(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// closedConns records the connections a pool destroyed, through its
// BeforeClose hook.
type closedConns struct {
	mu     sync.Mutex
	closed map[*pgx.Conn]bool
}

// watch makes cfg's pool record what it destroys in c.
func (c *closedConns) watch(cfg *pgxpool.Config) {
	c.closed = make(map[*pgx.Conn]bool)
	cfg.BeforeClose = func(conn *pgx.Conn) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.closed[conn] = true
	}
}

// has reports whether the pool destroyed conn.
func (c *closedConns) has(conn *pgx.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed[conn]
}

// acquire takes a connection from pool, released at t's cleanup unless
// the test released it first.
func acquire(tb testing.TB, pool *pgxpool.Pool) *pgxpool.Conn {
	tb.Helper()
	conn, err := pool.Acquire(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(conn.Release) // a second Release does nothing
	return conn
}

// connect opens a *pgx.Conn on dsn, closed at t's cleanup.
func connect(tb testing.TB, dsn string) *pgx.Conn {
	tb.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// querier is what *pgx.Conn, *pgxpool.Conn, *pgxpool.Pool and pgx.Tx
// have in common.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// pidOf returns the backend pid of q's session.
func pidOf(tb testing.TB, q querier) int {
	tb.Helper()
	var pid int
	if err := q.QueryRow(context.Background(), "SELECT pg_catalog.pg_backend_pid()").Scan(&pid); err != nil {
		tb.Fatal(err)
	}
	return pid
}

// randomKey returns a key that no other test uses: a bigint or a pair,
// with halves that pg_locks shows as they are.
func randomKey() advisory.Key {
	if mrand.IntN(2) == 0 {
		return advisory.PairKey(mrand.Int32N(1<<30)+1, mrand.Int32N(1<<30)+1)
	}
	return advisory.Int64Key(mrand.Int64N(1<<60) + 1)
}

// holders returns the locks granted on key, as pg_locks shows them.
func holders(tb testing.TB, obs *sql.DB, key advisory.Key) []pgtest.Lock {
	tb.Helper()
	locks, err := pgtest.LocksOf(context.Background(), obs, key)
	if err != nil {
		tb.Fatal(err)
	}
	var granted []pgtest.Lock
	for _, l := range locks {
		if l.Granted {
			granted = append(granted, l)
		}
	}
	return granted
}

// requireHeld fails tb unless exactly the backends pids hold key, in
// mode shared.
func requireHeld(tb testing.TB, obs *sql.DB, key advisory.Key, shared bool, pids ...int) {
	tb.Helper()
	got := holders(tb, obs, key)
	want := make([]pgtest.Lock, len(pids))
	for i, pid := range pids {
		want[i] = pgtest.Lock{PID: pid, Shared: shared, Granted: true}
	}
	if fmt.Sprint(sortLocks(got)) != fmt.Sprint(sortLocks(want)) {
		tb.Fatalf("pg_locks shows %v on %v; want %v", got, key, want)
	}
}

// sortLocks sorts locks by pid, in place, and returns them.
func sortLocks(locks []pgtest.Lock) []pgtest.Lock {
	slices.SortFunc(locks, func(a, b pgtest.Lock) int { return cmp.Compare(a.PID, b.PID) })
	return locks
}
