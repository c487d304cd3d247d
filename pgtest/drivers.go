package pgtest

import (
	"database/sql"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/stdlib" // also registers the "pgx" driver
)

// The database/sql drivers the integration tests run on.
const (
	// DriverPQ is github.com/lib/pq.
	DriverPQ = "pq"
	// DriverPGX is github.com/jackc/pgx/v5/stdlib with its default context
	// handling: a cancelled context closes the connection, ending the
	// session.
	DriverPGX = "pgx"
	// DriverPGXCancel is pgx stdlib with
	// pgconn.CancelRequestContextWatcherHandler: a cancelled context sends a
	// cancel request and keeps the session, so a late cancel can hit the
	// next statement.
	DriverPGXCancel = "pgx-cancel"
)

// Drivers names the drivers every integration test runs on. [EachDriver]
// takes another list, for tests that also cover [DriverPGXCancel].
var Drivers = []string{DriverPQ, DriverPGX}

// cancelDeadlineDelay is how long a DriverPGXCancel connection waits for the
// server to answer a cancel request before it gives the connection up.
const cancelDeadlineDelay = time.Second

// Open returns a new *sql.DB for driver on s, closed at tb's cleanup. An
// unknown driver fails the test.
func (s *Server) Open(tb testing.TB, driver string) *sql.DB {
	tb.Helper()
	db, err := s.OpenDB(driver)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// OpenDB returns a new *sql.DB for driver on s. The caller closes it. On a
// server from [Server.PgBouncer] it adds to the DSN what the driver needs
// through transaction pooling: see [PoolerDSN].
func (s *Server) OpenDB(driver string) (*sql.DB, error) {
	dsn := s.DSN
	if s.pooler {
		var err error
		if dsn, err = PoolerDSN(driver, dsn); err != nil {
			return nil, err
		}
	}
	return openDB(driver, dsn)
}

// poolerParams are the DSN parameters each driver needs through PgBouncer
// in transaction mode, where consecutive round trips may land on different
// backends, and a prepared statement, named or unnamed, made by one is
// missing on the next.
var poolerParams = map[string][2]string{
	// Parse, bind and execute in one round trip. By default a query with
	// arguments takes two: the unnamed statement of the first may be gone
	// when the second arrives.
	DriverPQ: {"binary_parameters", "yes"},
	// An unnamed statement and one round trip, nothing cached: the
	// default caches named prepared statements per connection.
	DriverPGX:       {"default_query_exec_mode", "exec"},
	DriverPGXCancel: {"default_query_exec_mode", "exec"},
}

// PoolerDSN returns dsn with the parameters driver needs to work through a
// transaction pooler such as PgBouncer in transaction mode: for DriverPQ
// binary_parameters=yes, for DriverPGX and DriverPGXCancel
// default_query_exec_mode=exec. [Server.OpenDB] adds them itself on a
// server from [Server.PgBouncer]; PoolerDSN is for a test that opens the
// DSN some other way.
func PoolerDSN(driver, dsn string) (string, error) {
	p, ok := poolerParams[driver]
	if !ok {
		return "", fmt.Errorf("unknown driver %q; want one of %q, %q, %q", driver, DriverPQ, DriverPGX, DriverPGXCancel)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("%s: the DSN is not a URL: %w", driver, err)
	}
	q := u.Query()
	q.Set(p[0], p[1])
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// openDB opens dsn with one of the named drivers.
func openDB(driver, dsn string) (*sql.DB, error) {
	switch driver {
	case DriverPQ:
		return sql.Open("postgres", dsn)
	case DriverPGX:
		return sql.Open("pgx", dsn)
	case DriverPGXCancel:
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", driver, err)
		}
		cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
			return &pgconn.CancelRequestContextWatcherHandler{
				Conn:          c,
				DeadlineDelay: cancelDeadlineDelay,
			}
		}
		return stdlib.OpenDB(*cfg), nil
	}
	return nil, fmt.Errorf("unknown driver %q; want one of %q, %q, %q", driver, DriverPQ, DriverPGX, DriverPGXCancel)
}
