package advisory_test

import (
	"context"
	"database/sql"
	"regexp"
	"strconv"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/pgadvisory/pgadvisory/mock"
)

// exactSQL makes a database of mock.New match statements to the expected
// SQL exactly; mock.New checks at cleanup that every expectation was met.
var exactSQL = mock.QueryMatcher(sqlmock.QueryMatcherEqual)

// sliceSQL matches statements as exactSQL does, except for the
// lock_timeout that a slice of a wait sets: a slice that a deadline ends
// waits for what is left of the wait, in whole milliseconds, so it may ask
// for up to sliceSlack milliseconds less than the expected statement when
// the statements before it took time.
var sliceSQL = mock.QueryMatcher(sqlmock.QueryMatcherFunc(matchSlice))

// sliceSlack is how many milliseconds short of the expected one a slice's
// lock_timeout may be under sliceSQL.
const sliceSlack = 50

// sliceMillis finds the lock_timeout that a slice sets, in a session's
// slice as in a transaction's: a string literal of digits, which the -1
// of the check after it is not.
var sliceMillis = regexp.MustCompile(`set_config\('lock_timeout', '([0-9]+)', true\)`)

// matchSlice is sliceSQL's matcher.
func matchSlice(expected, actual string) error {
	e, a := sliceMillis.FindStringSubmatchIndex(expected), sliceMillis.FindStringSubmatchIndex(actual)
	if e != nil && a != nil {
		want, _ := strconv.Atoi(expected[e[2]:e[3]])
		got, _ := strconv.Atoi(actual[a[2]:a[3]])
		if got <= want && got > want-sliceSlack {
			actual = actual[:a[2]] + expected[e[2]:e[3]] + actual[a[3]:]
		}
	}
	return sqlmock.QueryMatcherEqual.Match(expected, actual)
}

// mockConn returns a *sql.Conn on a fresh mock database, which matches
// statements with exactSQL unless opts say otherwise.
func mockConn(t *testing.T, opts ...mock.Option) (*sql.Conn, sqlmock.Sqlmock) {
	t.Helper()
	db, m := mock.New(t, append([]mock.Option{exactSQL}, opts...)...)
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, m
}

// mockTx returns a *sql.Tx on a fresh mock database, which matches
// statements with exactSQL unless opts say otherwise.
func mockTx(t *testing.T, opts ...mock.Option) (*sql.Tx, sqlmock.Sqlmock) {
	t.Helper()
	db, m := mock.New(t, append([]mock.Option{exactSQL}, opts...)...)
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
