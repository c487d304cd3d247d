package keyspace_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"testing"

	"github.com/pgadvisory/pgadvisory/internal/pgtest"
)

// This file holds what the integration tests share: a database of each
// test's own, so that the dictionary table is the test's alone.

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

// mustExec runs a statement and fails t on error.
func mustExec(t *testing.T, q querier, stmt string, args ...any) {
	t.Helper()
	if _, err := q.ExecContext(context.Background(), stmt, args...); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}
