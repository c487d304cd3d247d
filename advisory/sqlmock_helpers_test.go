package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
	"github.com/pgadvisory/pgadvisory/mock"
)

// What the unit tests share: their keys, the matchers of their mock
// databases, and the SQL that advisory sends, written out by hand for
// their expectations.

// The keys of the unit tests: a bigint, a pair, and the least bigint.
var (
	k42   = advisory.Int64Key(42)
	kPair = advisory.PairKey(1, -2)
	kMin  = advisory.Int64Key(-1 << 63)
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

// trySQL is the try of call, a lock function call: one row when it took
// the key, none when the key is busy, and, before call runs, an error of
// its own on a hot standby (SQLSTATE 22023) or on a session that bears a
// lease's mark (42704). It is the whole of an uncontended wait for one
// key, and the first statement of a busy one.
func trySQL(call string) string { return "SELECT 1 WHERE " + guardSQL + call + " END" }

// guardSQL opens the CASE that guards a lock: on a hot standby it sets
// lock_timeout to -1, which the server refuses (22023), and on a session
// that bears a lease's mark it sets a setting with no such name (42704),
// so that nothing after it runs.
const guardSQL = "CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL " +
	"WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE "

// checkSQL is the guard as a select-list entry of a slice, right after its
// bound: NULL, or the refusal's error before the waits run.
const checkSQL = guardSQL + "NULL END, "

// timeoutSQL is the statement that waits for lock, one or more lock
// function calls, for at most ms milliseconds: a slice of a wait,
// unguarded.
func timeoutSQL(lock string, ms int) string {
	return boundSQL("'"+strconv.Itoa(ms)+"'", lock)
}

// guardedTimeoutSQL is timeoutSQL guarded: the check comes first in the
// select list.
func guardedTimeoutSQL(lock string, ms int) string { return timeoutSQL(checkSQL+lock, ms) }

// boundSQL is the statement that waits for lock with lock_timeout set to
// bound, an SQL expression of text, and puts the setting back.
func boundSQL(bound, lock string) string {
	return "SELECT pg_catalog.set_config('lock_timeout', t.prev, true) FROM (SELECT pg_catalog.current_setting('lock_timeout') AS prev, " +
		"pg_catalog.set_config('lock_timeout', " + bound + ", true), " + lock + " OFFSET 0) AS t"
}

// sessionSliceSQL is a slice of a wait for an exclusive session lock, or a
// shared one, on one key, written as its lock functions' arguments ("42"),
// on a session with no transaction block open: it waits for the session
// lock itself, at most ms milliseconds.
func sessionSliceSQL(shared bool, key string, ms int) string {
	return sqltext.DirectSliceStmt(sqltext.Inline, sqltext.Guarded, shared, int64(ms), sliceKey(key)).Query
}

// sessionSlice is a slice of a wait for session locks on keys, guarded,
// as the library sends it on a session with no transaction block open:
// for one key the statement of DirectSliceStmt, for several
// SessionSlice's.
func sessionSlice(shared bool, ms int64, keys ...sqltext.Key) string {
	if len(keys) == 1 {
		return sqltext.DirectSliceStmt(sqltext.Inline, sqltext.Guarded, shared, ms, keys[0]).Query
	}
	return sqltext.SessionSlice(sqltext.Guarded, shared, ms, keys...)
}

// expectNotHeldHere expects the check that follows a slice for key that
// ran out, and answers that the session does not hold it.
func expectNotHeldHere(m sqlmock.Sqlmock, shared bool, key sqltext.Key) {
	m.ExpectExec(sqltext.HeldHere(sqltext.Inline, shared, key).Query).WithoutArgs().WillReturnResult(sqlmock.NewResult(0, 0))
}

// sliceKey parses a key written as its lock functions' arguments: "42" or
// "1,-2".
func sliceKey(key string) sqltext.Key {
	if a, b, ok := strings.Cut(key, ","); ok {
		x, _ := strconv.ParseInt(a, 10, 32)
		y, _ := strconv.ParseInt(b, 10, 32)
		return sqltext.Key{Pair: true, A: int32(x), B: int32(y)}
	}
	n, _ := strconv.ParseInt(key, 10, 64)
	return sqltext.Key{Bigint: n}
}

// xactSliceSQL is a slice of a wait for an exclusive transaction lock on
// one key, as for sessionSliceSQL, guarded, on a session whose
// lock_timeout is 0, which it puts back.
func xactSliceSQL(key string, ms int) string { return xactSliceBackSQL(key, ms, 0) }

// xactSliceBackSQL is xactSliceSQL on a session whose lock_timeout is
// prev milliseconds.
func xactSliceBackSQL(key string, ms, prev int) string {
	return "SELECT pg_catalog.set_config('lock_timeout', '" + strconv.Itoa(ms) + "', true), " + checkSQL +
		"pg_catalog.pg_advisory_xact_lock(" + key + "), pg_catalog.set_config('lock_timeout', '" + strconv.Itoa(prev) + "', true)"
}

// xactSlice is a slice of a wait for transaction locks on keys, guarded,
// as the library sends it on a session whose lock_timeout is 0: for one
// key the statement of GuardedXactKeySlice, for several
// GuardedXactSlice's.
func xactSlice(shared bool, ms int64, keys ...sqltext.Key) string {
	if len(keys) == 1 {
		return sqltext.GuardedXactKeySlice(sqltext.Guarded, shared, ms, 0, keys[0])
	}
	return sqltext.GuardedXactSlice(sqltext.Guarded, shared, ms, keys...)
}

// inSavepointSQL is slice run under the wait's savepoint, in a transaction
// the caller began; again rolls back to it first, after a slice that ran
// out.
func inSavepointSQL(again bool, slice string) string {
	begin := "SAVEPOINT pgadvisory_wait; "
	if again {
		begin = "ROLLBACK TO SAVEPOINT pgadvisory_wait; "
	}
	return begin + slice + "; RELEASE SAVEPOINT pgadvisory_wait"
}

// waitSettingsSQL is the query that reads the settings that bound a wait,
// and whether a transaction block is open: for one key right after the
// try that found it busy, for several after the first slice that ran out.
const waitSettingsSQL = "SELECT pg_catalog.current_setting('lock_timeout'), " +
	"pg_catalog.current_setting('statement_timeout'), pg_catalog.current_setting('deadlock_timeout'), " +
	"pg_catalog.statement_timestamp() <> pg_catalog.transaction_timestamp()"

// waitSettingsRows answers waitSettingsSQL with the session's
// lock_timeout, statement_timeout and deadlock_timeout, as
// current_setting shows them ("0", "500ms", "1s"), on a session with no
// transaction block open.
func waitSettingsRows(lock, statement, deadlock string) *sqlmock.Rows {
	return sqlmock.NewRows([]string{"lock_timeout", "statement_timeout", "deadlock_timeout", "in_block"}).AddRow(lock, statement, deadlock, false)
}

// releaseSQL is the statement that ends a session scope on a connection
// it owns: unlock, a function call, then every other session lock, and
// the check for a transaction left open.
func releaseSQL(unlock string) string {
	return endSQL("CASE WHEN " + unlock + " THEN pg_catalog.pg_advisory_unlock_all() IS NOT NULL ELSE false END")
}

// endSQL is the statement that ends a session scope whose release is held,
// a boolean expression.
func endSQL(held string) string {
	return "SELECT 1 FROM pg_catalog.generate_series(1, CASE WHEN " + held + " THEN 1 ELSE 0 END + " +
		"CASE WHEN pg_catalog.statement_timestamp() = pg_catalog.transaction_timestamp() THEN 0 ELSE 2 END)"
}

// A wait for a busy key runs in slices: statements that each wait at
// most about a second under lock_timeout, so that none holds a snapshot
// for longer. A slice is 1100 ms by default; one that runs out fails with
// SQLSTATE 55P03, and the wait goes on. A wait for one key, in a session
// as in a transaction, reads the session's settings right after the try
// that found it busy; a wait for several runs its first slice blind and
// reads them after the first slice that ran out. The unit tests of the
// waits are with their lock functions'.

// errRanOut is how the server fails a slice that ran out.
var errRanOut = &sqlState{"55P03", "canceling statement due to lock timeout"}

// defaultSettings answers sqltext.WaitSettings as a session with the
// server's defaults does.
func defaultSettings() *sqlmock.Rows { return waitSettingsRows("0", "0", "1s") }

// refusals are the server's answers to a lock statement that refused, on
// a hot standby or on a session that bears another lease's mark, and the
// error each becomes.
var refusals = []struct {
	name    string
	err     error // the server's
	wantErr error
}{
	{"Standby", mock.ServerError(sqltext.StandbyState), advisory.ErrStandby},
	{"SharedSession", mock.ServerError(sqltext.SharedState), advisory.ErrSharedSession},
}

// checkRefused fails t unless err is the refusal want, with the package's
// prefix, not a wrapped server error: the SQLSTATE is the check's device.
func checkRefused(t *testing.T, err, want, server error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("got %v; want %v", err, want)
	}
	if errors.Is(err, server) {
		t.Errorf("error %q wraps the server's refusal, which is no news to the caller", err)
	}
	if !strings.HasPrefix(err.Error(), "advisory: ") {
		t.Errorf("message %q lacks the package prefix", err)
	}
}

// checkKept fails t when conn's session was closed: a refusal takes
// nothing, so the session stays the caller's.
func checkKept(t *testing.T, conn *sql.Conn) {
	t.Helper()
	if err := conn.PingContext(context.Background()); err != nil {
		t.Errorf("after a refusal the session is gone (%v); want it kept", err)
	}
}

// TestSliceSQL checks the matcher the tests of timed slices use: exact,
// but for a slice's lock_timeout, which may fall short by less than
// sliceSlack, in a session's slice as in a transaction's, and not for the
// -1 of the check that follows it.
func TestSliceSQL(t *testing.T) {
	t.Parallel()
	slice, xact := sessionSliceSQL(false, "42", 1000), xactSliceSQL("42", 1000)
	tests := []struct {
		name         string
		want, actual string
		ok           bool
	}{
		{"Same", slice, slice, true},
		{"JustShort", slice, sessionSliceSQL(false, "42", 999), true},
		{"ShortBySlack", slice, sessionSliceSQL(false, "42", 1000-sliceSlack), false},
		{"Longer", slice, sessionSliceSQL(false, "42", 1001), false},
		{"OtherKey", slice, sessionSliceSQL(false, "43", 1000), false},
		{"OtherStatement", slice, "SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE pg_catalog.pg_try_advisory_lock(42) END", false},
		{"OtherCheck", slice, strings.Replace(slice, "'-1'", "'-2'", 1), false},
		{"XactForASessionSlice", xact, slice, false},
		{"XactJustShort", xact, xactSliceSQL("42", 999), true},
		{"XactShortBySlack", xact, xactSliceSQL("42", 1000-sliceSlack), false},
		{"XactLonger", xact, xactSliceSQL("42", 1001), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := matchSlice(tt.want, tt.actual); (err == nil) != tt.ok {
				t.Fatalf("matchSlice(%q, %q) = %v; want a match: %v", tt.want, tt.actual, err, tt.ok)
			}
		})
	}
}
