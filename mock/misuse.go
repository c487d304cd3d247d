package mock

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/DATA-DOG/go-sqlmock"
)

// misuse reports that a helper was asked for something advisory cannot
// do: it fails the test of a mock made by [New] through its testing.TB,
// and, on any mock, lays down an expectation that nothing matches: a
// statement that is an SQL comment, "-- " and msg, failing with msg. The
// code under test then fails at its next statement with an error that
// shows msg, and m.ExpectationsWereMet reports it, so that a
// mock made by [NewDB] or sqlmock.New reports the misuse too. The helper
// then lays down nothing more, and returns expectations laid down on no
// mock (see [detachedExec]), on which chaining still works.
func misuse(m sqlmock.Sqlmock, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if at := caller(); at != "" {
		msg += " (called at " + at + ")"
	}
	if w, ok := m.(*matched); ok && w.tb != nil {
		w.tb.Helper()
		w.tb.Errorf("%s", msg)
	}
	m.ExpectExec(pattern(m, "-- "+msg)).WillReturnError(errors.New(msg))
}

// detachedExec returns an expectation laid down on no mock, for a helper
// that reported a misuse to return.
func detachedExec() *sqlmock.ExpectedExec { return &sqlmock.ExpectedExec{} }

// detachedQuery is [detachedExec] for a query.
func detachedQuery() *sqlmock.ExpectedQuery { return &sqlmock.ExpectedQuery{} }

// caller returns file:line of the first caller outside this package: the
// test's call of the helper it misused.
func caller() string {
	pcs := make([]uintptr, 16)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, pkgPath+".") {
			return fmt.Sprintf("%s:%d", filepath.Base(f.File), f.Line)
		}
		if !more {
			return ""
		}
	}
}

// pkgPath is this package's import path, as runtime names its functions.
const pkgPath = "github.com/pgadvisory/pgadvisory/mock"
