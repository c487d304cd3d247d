package keyspace_test

import (
	"database/sql"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/pgadvisory/pgadvisory/mock"
)

// exactSQL makes a database of mock.New match statements to the expected
// SQL exactly; mock.New checks at cleanup that every expectation was met.
var exactSQL = mock.QueryMatcher(sqlmock.QueryMatcherEqual)

// rows is the result of a statement that affected n rows.
func rows(n int64) sql.Result { return sqlmock.NewResult(0, n) }

// sqlState is a driver error carrying a SQLSTATE, as lib/pq's and pgx's do.
type sqlState struct{ code, msg string }

func (e *sqlState) Error() string    { return "driver: " + e.msg + " (SQLSTATE " + e.code + ")" }
func (e *sqlState) SQLState() string { return e.code }
