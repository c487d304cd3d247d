package mock

import (
	"database/sql"
	"database/sql/driver"
	"fmt"
	"regexp"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/pgadvisory/pgadvisory/internal/scope"
)

// An Option configures the sqlmock database that [New] creates. Each one
// passes the sqlmock option of the same name.
type Option func(*config)

type config struct {
	matcher   sqlmock.QueryMatcher
	converter driver.ValueConverter
	pings     bool
	probe     bool
}

// QueryMatcher makes the mock compare statements with qm, as
// sqlmock.QueryMatcherOption does; the helpers then lay down expectations
// that qm accepts. The default is sqlmock.QueryMatcherRegexp.
func QueryMatcher(qm sqlmock.QueryMatcher) Option { return func(c *config) { c.matcher = qm } }

// ValueConverter sets the mock's argument converter, as
// sqlmock.ValueConverterOption does.
func ValueConverter(vc driver.ValueConverter) Option {
	return func(c *config) { c.converter = vc }
}

// MonitorPings makes the mock expect pings, as sqlmock.MonitorPingsOption
// does.
func MonitorPings(on bool) Option { return func(c *config) { c.pings = on } }

// New returns a sqlmock database and its mock for one test. When the test
// ends, a cleanup reports every expectation that was not met as a test
// error, then closes the database. A helper of this package asked for
// something advisory never sends, such as an outcome that is not one of
// the constants or options advisory rejects, reports it as an error of t
// (see the package documentation's Misuse section).
//
// The mock knows its query matcher (see [QueryMatcher]), so the helpers of
// this package write expectations it accepts. sqlmock's options are of an
// unexported type, which is why New takes its own [Option] values instead.
func New(t testing.TB, opts ...Option) (*sql.DB, sqlmock.Sqlmock) {
	t.Helper()
	db, m, err := NewDB(opts...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	m.(*matched).tb = t
	t.Cleanup(func() {
		if err := m.ExpectationsWereMet(); err != nil {
			t.Errorf("mock: %v", err)
		}
		_ = db.Close() // sqlmock reports a close nobody expected; that is fine here
	})
	return db, m
}

// NewDB is [New] outside a test, as in a runnable example: the caller
// checks m.ExpectationsWereMet() and closes db. It is the other way to get
// a mock whose helpers know its matcher; [QueryMatcher] chooses the
// matcher for both. The helpers take a mock made by sqlmock.New as it is,
// and write for sqlmock's default matcher, sqlmock.QueryMatcherRegexp.
func NewDB(opts ...Option) (*sql.DB, sqlmock.Sqlmock, error) {
	c := config{matcher: sqlmock.QueryMatcherRegexp, converter: driver.DefaultParameterConverter}
	for _, opt := range opts {
		if opt != nil {
			opt(&c)
		}
	}
	if c.matcher == nil {
		c.matcher = sqlmock.QueryMatcherRegexp
	}
	if c.converter == nil {
		c.converter = driver.DefaultParameterConverter
	}
	db, m, err := sqlmock.New(
		sqlmock.QueryMatcherOption(c.matcher),
		sqlmock.ValueConverterOption(c.converter),
		sqlmock.MonitorPingsOption(c.pings),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("mock: new sqlmock: %w", err)
	}
	if c.probe {
		scope.ProbeOnMock(db)
	}
	return db, &matched{Sqlmock: m, qm: c.matcher}, nil
}

// matched is a mock marked with its query matcher, and, when [New] made
// it, with the test that a misused helper fails.
type matched struct {
	sqlmock.Sqlmock
	qm sqlmock.QueryMatcher
	tb testing.TB // nil from NewDB
}

var _ sqlmock.Sqlmock = (*matched)(nil)

// pattern returns the expected-SQL string under which m's matcher accepts
// exactly stmt. sqlmock keeps one string per expectation and its two
// matchers read it differently: QueryMatcherRegexp compiles it, so the text
// must be quoted and anchored, and QueryMatcherEqual compares it as is. The
// quoted, anchored form is tried first, then the plain text; a matcher that
// accepts neither gets the quoted form, sqlmock's default.
func pattern(m sqlmock.Sqlmock, stmt string) string {
	qm := sqlmock.QueryMatcherRegexp
	if w, ok := m.(*matched); ok {
		qm = w.qm
	}
	quoted := "^" + regexp.QuoteMeta(stmt) + "$"
	if qm.Match(quoted, stmt) == nil {
		return quoted
	}
	if qm.Match(stmt, stmt) == nil {
		return stmt
	}
	return quoted
}
