package keyspace_test

import (
	"database/sql"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"
)

// newMock returns a database whose statements must match the expected SQL
// exactly, and checks at cleanup that every expectation was met.
func newMock(t *testing.T) (*sql.DB, sqlmock.Sqlmock) {
	t.Helper()
	db, m, err := sqlmock.New(sqlmock.QueryMatcherOption(sqlmock.QueryMatcherEqual))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Close()
		if err := m.ExpectationsWereMet(); err != nil {
			t.Error(err)
		}
	})
	return db, m
}

// rows is the result of a statement that affected n rows.
func rows(n int64) sql.Result { return sqlmock.NewResult(0, n) }

// sqlState is a driver error carrying a SQLSTATE, as lib/pq's and pgx's do.
type sqlState struct{ code, msg string }

func (e *sqlState) Error() string    { return "driver: " + e.msg + " (SQLSTATE " + e.code + ")" }
func (e *sqlState) SQLState() string { return e.code }
