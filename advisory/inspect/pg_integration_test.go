package inspect_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/pgtest"
)

// This file holds what the integration tests share: a database of each
// test's own, and a few queries on the sessions it runs.

// pollTimeout bounds every wait for the server to show a state.
const pollTimeout = 15 * time.Second

// newName returns a fresh lower-case identifier starting with prefix.
func newName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// editDSN returns dsn changed by edit.
func editDSN(t *testing.T, dsn string, edit func(u *url.URL)) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parse DSN: %v", err)
	}
	edit(u)
	return u.String()
}

// setParam returns an edit for editDSN that sets a connection
// parameter, such as application_name.
func setParam(name, value string) func(u *url.URL) {
	return func(u *url.URL) {
		q := u.Query()
		q.Set(name, value)
		u.RawQuery = q.Encode()
	}
}

// openDSN opens dsn with tg's driver, closed at t's cleanup.
func openDSN(t *testing.T, tg pgtest.Target, dsn string) *sql.DB {
	t.Helper()
	srv := *tg.Server
	srv.DSN = dsn
	return srv.Open(t, tg.Driver)
}

// ownDatabase creates a database for t on tg's server, dropped at t's
// cleanup, and returns tg moved onto it, its sessions named app.
func ownDatabase(t *testing.T, tg pgtest.Target, app string) pgtest.Target {
	t.Helper()
	name := newName("pgadvisory_t_")
	ctx := context.Background()
	if _, err := tg.DB.ExecContext(ctx, "CREATE DATABASE "+name+" TEMPLATE template0"); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		if _, err := tg.DB.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	srv := *tg.Server
	srv.DSN = editDSN(t, tg.Server.DSN, func(u *url.URL) {
		u.Path = "/" + name
		setParam("application_name", app)(u)
	})
	return pgtest.Target{Server: &srv, Driver: tg.Driver, DB: srv.Open(t, tg.Driver)}
}

// querier is what *sql.DB, *sql.Conn and *sql.Tx have in common.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

var (
	_ querier = (*sql.DB)(nil)
	_ querier = (*sql.Conn)(nil)
	_ querier = (*sql.Tx)(nil)
)

// backendPID returns the pid of the session behind q.
func backendPID(t *testing.T, q querier) int {
	t.Helper()
	var pid int
	if err := q.QueryRowContext(context.Background(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatalf("pg_backend_pid: %v", err)
	}
	return pid
}

// dedicatedConn takes a connection from db, closed at t's cleanup.
func dedicatedConn(t *testing.T, db *sql.DB) *sql.Conn {
	t.Helper()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// mustExec runs a statement and fails t on error.
func mustExec(t *testing.T, q querier, stmt string, args ...any) {
	t.Helper()
	if _, err := q.ExecContext(context.Background(), stmt, args...); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}

// requireNoLocks fails t if backend pid holds or waits for any advisory
// lock, as pg_locks shows them.
func requireNoLocks(t *testing.T, db *sql.DB, pid int) {
	t.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(),
		"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = $1", pid).Scan(&n); err != nil {
		t.Fatalf("pg_locks: %v", err)
	}
	if n > 0 {
		t.Fatalf("backend %d still has %d advisory locks", pid, n)
	}
}
