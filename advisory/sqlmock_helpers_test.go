package advisory_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/pgadvisory/pgadvisory/mock"
)

// exactSQL makes a database of mock.New match statements to the expected
// SQL exactly; mock.New checks at cleanup that every expectation was met.
var exactSQL = mock.QueryMatcher(sqlmock.QueryMatcherEqual)

// mockConn returns a *sql.Conn on a fresh mock database.
func mockConn(t *testing.T) (*sql.Conn, sqlmock.Sqlmock) {
	t.Helper()
	db, m := mock.New(t, exactSQL)
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, m
}

// mockTx returns a *sql.Tx on a fresh mock database.
func mockTx(t *testing.T) (*sql.Tx, sqlmock.Sqlmock) {
	t.Helper()
	db, m := mock.New(t, exactSQL)
	m.ExpectBegin()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	return tx, m
}

// rows is the result of a statement that affected n rows.
func rows(n int64) sql.Result { return sqlmock.NewResult(0, n) }

// sqlState is a driver error carrying a SQLSTATE, as lib/pq's and pgx's do.
type sqlState struct{ code, msg string }

func (e *sqlState) Error() string    { return "driver: " + e.msg + " (SQLSTATE " + e.code + ")" }
func (e *sqlState) SQLState() string { return e.code }

// endedAsCallReturns is a context that was cancelled at the very moment a
// call succeeded: the driver never saw it end, but Err reports it. Some
// drivers do report success for a wait whose context expired as it ended.
type endedAsCallReturns struct{ context.Context }

func (endedAsCallReturns) Done() <-chan struct{} { return nil }
func (endedAsCallReturns) Err() error            { return context.Canceled }
