package mock_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"
)

// conn returns a connection of db, closed when the test ends.
func conn(t *testing.T, db *sql.DB) *sql.Conn {
	t.Helper()
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// begin expects and begins a transaction on db.
func begin(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) *sql.Tx {
	t.Helper()
	m.ExpectBegin()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

// rollback expects and rolls back tx.
func rollback(t *testing.T, tx *sql.Tx, m sqlmock.Sqlmock) {
	t.Helper()
	m.ExpectRollback()
	if err := tx.Rollback(); err != nil {
		t.Error(err)
	}
}

// plain returns a mock made by sqlmock.New itself, comparing statements
// with sqlmock.QueryMatcherEqual if equal is set, and closed when the test
// ends.
func plain(t *testing.T, equal bool) (*sql.DB, sqlmock.Sqlmock) {
	t.Helper()
	qm := sqlmock.QueryMatcherRegexp
	if equal {
		qm = sqlmock.QueryMatcherEqual
	}
	db, m, err := sqlmock.New(sqlmock.QueryMatcherOption(qm))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db, m
}
