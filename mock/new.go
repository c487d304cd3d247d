package mock

import (
	"database/sql"
	"database/sql/driver"
	"regexp"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"
)

// An Option configures the sqlmock database that [New] creates. Each one
// passes the sqlmock option of the same name.
type Option func(*config)

type config struct {
	matcher   sqlmock.QueryMatcher
	converter driver.ValueConverter
	pings     bool
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
// error, then closes the database.
//
// The mock knows its query matcher (see [QueryMatcher]), so the helpers of
// this package write expectations it accepts. sqlmock's options are of an
// unexported type, which is why New takes its own [Option] values instead.
func New(t testing.TB, opts ...Option) (*sql.DB, sqlmock.Sqlmock) {
	t.Helper()
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
		t.Fatalf("mock: new sqlmock: %v", err)
	}
	t.Cleanup(func() {
		if err := m.ExpectationsWereMet(); err != nil {
			t.Errorf("mock: %v", err)
		}
		_ = db.Close() // sqlmock reports a close nobody expected; that is fine here
	})
	return db, WithQueryMatcher(m, c.matcher)
}

// WithQueryMatcher returns m, still the same mock, marked as comparing
// statements with qm, so that the helpers of this package write
// expectations qm accepts. Use it for a mock made by sqlmock.New or
// sqlmock.NewWithDSN with sqlmock.QueryMatcherOption; a mock made by [New]
// is marked already. The helpers take an unmarked mock to use sqlmock's
// default, sqlmock.QueryMatcherRegexp.
func WithQueryMatcher(m sqlmock.Sqlmock, qm sqlmock.QueryMatcher) sqlmock.Sqlmock {
	if w, ok := m.(*matched); ok {
		m = w.Sqlmock
	}
	if qm == nil {
		qm = sqlmock.QueryMatcherRegexp
	}
	return &matched{Sqlmock: m, qm: qm}
}

// matched is a mock marked with its query matcher.
type matched struct {
	sqlmock.Sqlmock
	qm sqlmock.QueryMatcher
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
