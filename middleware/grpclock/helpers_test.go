package grpclock_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/mock"
)

// ordersNS is the namespace of order keys in the tests, and order42 the
// key of order 42, in a request field or in metadata alike.
const ordersNS = 7

var order42 = advisory.PairKey(ordersNS, 42)

// exact makes a mock compare statements as plain text.
var exact = mock.QueryMatcher(sqlmock.QueryMatcherEqual)

// errSecret stands for a driver error whose text must never reach a
// client.
var errSecret = errors.New("secret: SELECT pg_advisory_xact_lock failed on host db-7")

// update42 is the statement the test handlers send.
const update42 = "UPDATE orders SET paid = true WHERE id = 42"

// expectUpdate42 lays down update42.
func expectUpdate42(m sqlmock.Sqlmock) {
	m.ExpectExec(update42).WillReturnResult(sqlmock.NewResult(0, 1))
}

// leaks reports whether a client's message shows something it must not:
// a driver's message, SQL, a Go type or a method name.
func leaks(msg string) bool {
	for _, s := range []string{"secret", "SELECT", "SQLSTATE", "wrapperspb", "*", "pgadvisory.test", "/Pay"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// mustPanic checks that f panics with a message naming the package.
func mustPanic(t *testing.T, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		s, ok := recover().(string)
		if !ok || !strings.HasPrefix(s, "grpclock: ") {
			t.Errorf("panic %q, want one starting with %q", s, "grpclock: ")
		}
	}()
	f()
}
