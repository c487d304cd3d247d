package httplock_test

import (
	"database/sql"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/httplock"
	"github.com/pgadvisory/pgadvisory/mock"
)

// ordersNS is the namespace of order keys in the unit tests, and order42
// the key of /orders/42.
const ordersNS = 7

var order42 = advisory.PairKey(ordersNS, 42)

// exact makes a mock compare statements as plain text, so that the tests'
// own statements need no escaping.
var exact = mock.QueryMatcher(sqlmock.QueryMatcherEqual)

// errSecret stands for a driver error whose text must never reach a
// client.
var errSecret = errors.New("secret: SELECT pg_advisory_xact_lock failed on host db-7")

// affected is the result of a statement that changed n rows.
func affected(n int64) sql.Result { return sqlmock.NewResult(0, n) }

// expectLocked expects the begin and the try-lock on order 42 that a
// request for /orders/42 sends, granted; the test lays down the rest.
func expectLocked(m sqlmock.Sqlmock) {
	mock.ExpectWithXactLock(m, order42, mock.XactGranted, advisory.Try())
}

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
func lock(db *sql.DB, opts ...httplock.Option) func(http.Handler) http.Handler {
	return httplock.XactLock(db, httplock.PathKey(ordersNS, "id"), opts...)
}

// mustPanic checks that f panics with a message naming the package.
func mustPanic(t *testing.T, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		v := recover()
		s, ok := v.(string)
		if !ok || !strings.HasPrefix(s, "httplock: ") {
			t.Errorf("panic %v, want a message starting with %q", v, "httplock: ")
		}
	}()
	f()
}
