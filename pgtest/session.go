package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"testing"
)

// This file holds what integration tests do with sessions and databases
// of a [Target]: a database of a test's own, sessions told apart by
// application_name, and the few queries that every package's tests run on
// a session.

// Querier is what *sql.DB, *sql.Conn and *sql.Tx have in common.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

var (
	_ Querier = (*sql.DB)(nil)
	_ Querier = (*sql.Conn)(nil)
	_ Querier = (*sql.Tx)(nil)
)

// Exec runs a statement on q and fails tb on error.
func Exec(tb testing.TB, q Querier, stmt string, args ...any) {
	tb.Helper()
	if _, err := q.ExecContext(context.Background(), stmt, args...); err != nil {
		tb.Fatalf("%s: %v", stmt, err)
	}
}

// BackendPID returns the pid of the session behind q. It does not need a
// testing.TB, so a goroutine other than the test's may call it; [PID] is
// the test goroutine's form.
func BackendPID(ctx context.Context, q Querier) (int, error) {
	var pid int
	if err := q.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		return 0, fmt.Errorf("pg_backend_pid: %w", err)
	}
	return pid, nil
}

// PID returns the pid of the session behind q, and fails tb if it cannot.
func PID(tb testing.TB, q Querier) int {
	tb.Helper()
	pid, err := BackendPID(context.Background(), q)
	if err != nil {
		tb.Fatal(err)
	}
	return pid
}

// Conn takes a dedicated connection from db, closed at tb's cleanup.
func Conn(tb testing.TB, db *sql.DB) *sql.Conn {
	tb.Helper()
	conn, err := db.Conn(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	return conn
}

// UniqueName returns prefix followed by 12 random lower-case hex digits:
// a name that no other test uses, fit for a database, a role or an
// application_name.
func UniqueName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// WithDSN returns a copy of s whose DSN edit has changed, for example to
// log in as another role or to name another database. It fails tb if s's
// DSN does not parse. The copy is the same server: [Server.Open] on it
// opens connections the way it does on s, through PgBouncer if s leads
// there.
func (s *Server) WithDSN(tb testing.TB, edit func(u *url.URL)) *Server {
	tb.Helper()
	u, err := url.Parse(s.DSN)
	if err != nil {
		tb.Fatalf("pgtest: parse DSN: %v", err)
	}
	edit(u)
	c := *s
	c.DSN = u.String()
	return &c
}

// SetParam sets the connection parameter name of u to value, as in
// SetParam(u, "application_name", "inspect").
func SetParam(u *url.URL, name, value string) {
	q := u.Query()
	q.Set(name, value)
	u.RawQuery = q.Encode()
}

// OpenApp opens a *sql.DB on tg's server and driver whose sessions carry
// application_name app, so that pg_stat_activity tells them apart. It is
// closed at tb's cleanup.
func OpenApp(tb testing.TB, tg Target, app string) *sql.DB {
	tb.Helper()
	return openParam(tb, tg, "application_name", app)
}

// OpenSetting opens a *sql.DB on tg's server and driver whose sessions
// start with the setting name at value, as a role or database setting
// would set it, such as statement_timeout at "200ms", and fails tb unless
// SHOW name on one of them reports value as it was given. It is closed at
// tb's cleanup.
func OpenSetting(tb testing.TB, tg Target, name, value string) *sql.DB {
	tb.Helper()
	db := openParam(tb, tg, name, value)
	var got string
	if err := db.QueryRow("SHOW " + name).Scan(&got); err != nil || got != value {
		tb.Fatalf("SHOW %s = %q, %v; want %q", name, got, err, value)
	}
	return db
}

// openParam opens a *sql.DB on tg's server and driver whose DSN carries
// the connection parameter name at value. Both drivers pass a parameter
// they do not know on to the server, which takes it as a setting.
func openParam(tb testing.TB, tg Target, name, value string) *sql.DB {
	tb.Helper()
	return tg.Server.WithDSN(tb, func(u *url.URL) { SetParam(u, name, value) }).Open(tb, tg.Driver)
}

// NewDatabase creates a database of tb's own on tg's server, dropped at
// tb's cleanup, and returns tg moved onto it: its Server's DSN names the
// new database and application_name app, and its DB is opened there.
//
// Advisory locks belong to a database, and so do tables: a test in a
// database of its own sees its own locks and tables and no other test's,
// even with fixed keys and table names.
func NewDatabase(tb testing.TB, tg Target, app string) Target {
	tb.Helper()
	name := UniqueName("pgadvisory_t_")
	ctx := context.Background()
	if _, err := tg.DB.ExecContext(ctx, "CREATE DATABASE "+name+" TEMPLATE template0"); err != nil {
		tb.Fatalf("pgtest: create database: %v", err)
	}
	tb.Cleanup(func() {
		if _, err := tg.DB.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			tb.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	srv := tg.Server.WithDSN(tb, func(u *url.URL) {
		u.Path = "/" + name
		SetParam(u, "application_name", app)
	})
	return Target{Server: srv, Driver: tg.Driver, DB: srv.Open(tb, tg.Driver)}
}

// AwaitIdle returns once db has no connection in use, and fails tb if
// one still is after [PollTimeout]. A transaction that a call's context
// ended is rolled back by database/sql in a goroutine of its own, so its
// connection may come back to the pool a moment after the call returned.
func AwaitIdle(tb testing.TB, db *sql.DB) {
	tb.Helper()
	if err := Poll(pollInterval, func() (bool, error) { return db.Stats().InUse == 0, nil }); err != nil {
		tb.Fatalf("%d connections still in use: %v", db.Stats().InUse, err)
	}
}

// locksOfPIDQuery reads the advisory locks that one backend holds or
// waits for, in any database.
const locksOfPIDQuery = `SELECT coalesce(pid, 0), mode, granted FROM pg_locks
WHERE locktype = 'advisory' AND pid = $1
ORDER BY classid, objid, objsubid`

// LocksOfPID returns the advisory locks that backend pid holds or waits
// for.
func LocksOfPID(ctx context.Context, db *sql.DB, pid int) ([]Lock, error) {
	return queryLocks(ctx, db, locksOfPIDQuery, pid)
}

// RequireNoLocks fails tb if backend pid holds or waits for any advisory
// lock, as pg_locks shows them.
func RequireNoLocks(tb testing.TB, db *sql.DB, pid int) {
	tb.Helper()
	locks, err := LocksOfPID(context.Background(), db, pid)
	if err != nil {
		tb.Fatal(err)
	}
	if len(locks) > 0 {
		tb.Fatalf("backend %d still has %d advisory locks: %v", pid, len(locks), locks)
	}
}
