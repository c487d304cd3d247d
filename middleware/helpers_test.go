package middleware_test

import (
	"database/sql"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
	"github.com/pgadvisory/pgadvisory/middleware"
)

// ordersNS is the namespace of order keys in the unit tests.
const ordersNS = 7

// The statements the middleware sends for order 42, built from the text
// advisory sends.
var (
	tryLock42  = sqltext.TryLock(true, false, sqltext.PairArg(ordersNS, 42))
	waitLock42 = func(d time.Duration) string {
		return sqltext.LockTimeout(sqltext.Lock(true, false, sqltext.PairArg(ordersNS, 42)), d.Milliseconds(), true)
	}
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

// expectLocked expects the begin and the try-lock on order 42 that a
// request for /orders/42 sends, granted.
func expectLocked(m sqlmock.Sqlmock) {
	m.ExpectBegin()
	m.ExpectExec(tryLock42).WithoutArgs().WillReturnResult(rows(1))
}

// sqlState is a driver error carrying a SQLSTATE, as lib/pq's and pgx's do.
type sqlState struct{ code, msg string }

func (e *sqlState) Error() string    { return "driver: " + e.msg + " (SQLSTATE " + e.code + ")" }
func (e *sqlState) SQLState() string { return e.code }

// ordersMux routes /orders/{id} through mw to h, as an application would.
func ordersMux(mw func(http.Handler) http.Handler, h http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/orders/{id}", mw(h))
	return mux
}

// spyWriter records, at the first byte the middleware lets through,
// whether the mock's expectations (the COMMIT or ROLLBACK among them) had
// all been met: the transaction must end before the response begins.
type spyWriter struct {
	*httptest.ResponseRecorder
	m       sqlmock.Sqlmock
	wrote   bool
	atWrite error // m.ExpectationsWereMet() at the first write
}

func newSpy(m sqlmock.Sqlmock) *spyWriter {
	return &spyWriter{ResponseRecorder: httptest.NewRecorder(), m: m}
}

var _ http.Flusher = (*spyWriter)(nil)

func (s *spyWriter) first() {
	if !s.wrote {
		s.wrote = true
		s.atWrite = s.m.ExpectationsWereMet()
	}
}

func (s *spyWriter) WriteHeader(code int) { s.first(); s.ResponseRecorder.WriteHeader(code) }

func (s *spyWriter) Write(b []byte) (int, error) { s.first(); return s.ResponseRecorder.Write(b) }

func (s *spyWriter) Flush() { s.first(); s.ResponseRecorder.Flush() }

// lock is the middleware under test with the unit tests' key.
func lock(db *sql.DB, opts ...middleware.Option) func(http.Handler) http.Handler {
	return middleware.XactLock(db, middleware.PathKey(ordersNS, "id"), opts...)
}
