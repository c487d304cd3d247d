package inspect_test

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
