package pgtest

import (
	"database/sql"
	"fmt"
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

// OpenDB returns a new *sql.DB for driver on s. The caller closes it.
func (s *Server) OpenDB(driver string) (*sql.DB, error) {
	return openDB(driver, s.DSN)
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
