package mock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/mock"
)

// TestHelpersMatchOnlyTheirStatement checks that an expectation accepts
// nothing but its own statement under every matcher: not a statement that
// contains it, not another key, not one with arguments.
func TestHelpersMatchOnlyTheirStatement(t *testing.T) {
	t.Parallel()
	key := advisory.Int64Key(42)
	others := []struct {
		name string
		stmt string
		args []any
	}{
		{"Wrapped", "SET LOCAL lock_timeout = 5; SELECT pg_catalog.pg_advisory_xact_lock(42); SET LOCAL lock_timeout TO DEFAULT", nil},
		{"Prefixed", "SELECT pg_catalog.pg_advisory_xact_lock(42), 1", nil},
		{"OtherKey", "SELECT pg_catalog.pg_advisory_xact_lock(420)", nil},
		{"Shared", "SELECT pg_catalog.pg_advisory_xact_lock_shared(42)", nil},
		{"WithArgs", "SELECT pg_catalog.pg_advisory_xact_lock(42)", []any{1}},
		{"Unqualified", "SELECT pg_advisory_xact_lock(42)", nil},
	}
	for _, mt := range matchers {
		for _, o := range others {
			t.Run(mt.name+"/"+o.name, func(t *testing.T) {
				t.Parallel()
				db, m := mt.new(t)
				tx := begin(t, db, m)
				mock.ExpectXactLock(m, key)
				if _, err := tx.ExecContext(context.Background(), o.stmt, o.args...); err == nil {
					t.Fatalf("%q with args %v matched the expectation for XactLock(%v)", o.stmt, o.args, key)
				}
				// Now send the right one, so the expectations are met.
				if err := advisory.XactLock(context.Background(), tx, key); err != nil {
					t.Fatal(err)
				}
				rollback(t, tx, m)
			})
		}
	}
}

// TestCustomMatcher checks that the helpers find the form a matcher of the
// caller's own accepts.
func TestCustomMatcher(t *testing.T) {
	t.Parallel()
	var seen []string
	foldEqual := sqlmock.QueryMatcherFunc(func(expected, actual string) error {
		seen = append(seen, expected)
		if !strings.EqualFold(expected, actual) {
			return fmt.Errorf("%q is not %q", actual, expected)
		}
		return nil
	})
	db, m := mock.New(t, mock.QueryMatcher(foldEqual))
	tx := begin(t, db, m)
	mock.ExpectTryXactLock(m, advisory.PairKey(1, 2), true)
	seen = nil
	if ok, err := advisory.TryXactLock(context.Background(), tx, advisory.PairKey(1, 2)); !ok || err != nil {
		t.Fatalf("TryXactLock = %v, %v", ok, err)
	}
	if want := "SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL " +
		"WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL " +
		"ELSE pg_catalog.pg_try_advisory_xact_lock(1,2) END"; len(seen) != 1 || seen[0] != want {
		t.Errorf("the matcher saw expected SQL %q, want [%q]", seen, want)
	}
	rollback(t, tx, m)
}

// recordingTB records what New reports at cleanup.
type recordingTB struct {
	testing.TB
	cleanups []func()
	errors   []string
}

func (r *recordingTB) Helper()          {}
func (r *recordingTB) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *recordingTB) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recordingTB) cleanup() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

func TestNewChecksExpectationsAtCleanup(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		met     bool
		wantErr bool
	}{
		{"Met", true, false},
		{"Unmet", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := &recordingTB{TB: t}
			db, m := mock.New(rec)
			mock.ExpectUnlockAll(m)
			if tc.met {
				if err := advisory.UnlockAll(context.Background(), conn(t, db)); err != nil {
					t.Fatal(err)
				}
			}
			rec.cleanup()
			if got := len(rec.errors) > 0; got != tc.wantErr {
				t.Errorf("cleanup reported %q, want an error: %v", rec.errors, tc.wantErr)
			}
			if err := db.PingContext(context.Background()); err == nil {
				t.Error("db still open after cleanup")
			}
		})
	}
}

// TestHelperMisuse checks that a helper asked for something advisory
// cannot do fails the test of a mock from New at once, naming the package
// and the test's line, instead of panicking; that on any mock it lays down
// an expectation that ExpectationsWereMet reports, and nothing before it;
// and that chaining on what it returns still works.
func TestHelperMisuse(t *testing.T) {
	t.Parallel()
	key := advisory.Int64Key(1)
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		call func(m sqlmock.Sqlmock)
		want string
	}{
		{"BadWait", func(m sqlmock.Sqlmock) {
			mock.ExpectWithXactLock(m, key, mock.Commit, advisory.Wait(-time.Second)).Commit.WillReturnError(boom)
		}, "bad option"},
		{"XactNoOutcome", func(m sqlmock.Sqlmock) {
			s := mock.ExpectWithXactLock(m, key, 0)
			s.Begin.WillReturnError(boom)
			s.Lock.WillReturnError(boom)
			s.Rollback.WillReturnError(boom)
		}, "not an outcome"},
		{"SessionNoOutcome", func(m sqlmock.Sqlmock) {
			s := mock.ExpectWithSessionLock(m, key, 0)
			s.Lock.WillReturnError(boom)
			s.ExpectRelease().WillReturnError(boom)
			s.ExpectHeartbeat(true)
		}, "not an outcome"},
		{"XactNotAcquiredWithoutTry", func(m sqlmock.Sqlmock) {
			mock.ExpectWithXactLock(m, key, mock.XactNotAcquired, advisory.Wait(time.Second))
		}, "advisory.Try()"},
		{"SessionNotAcquiredWithoutTry", func(m sqlmock.Sqlmock) { mock.ExpectWithSessionLock(m, key, mock.SessionNotAcquired) }, "advisory.Try()"},
		{"LeaseNoOutcome", func(m sqlmock.Sqlmock) {
			s := mock.ExpectAcquire(m, key, 0).WithToken(3)
			s.Start.WillReturnError(boom)
			s.ExpectHeartbeat(true)
			s.ExpectRelease()
		}, "not an outcome"},
		{"LeaseNotAcquiredWithoutTry", func(m sqlmock.Sqlmock) { mock.ExpectAcquire(m, key, mock.LeaseNotAcquired) }, "advisory.Try()"},
		{"LeaseBadHeartbeat", func(m sqlmock.Sqlmock) {
			mock.ExpectAcquire(m, key, mock.LeaseGranted, advisory.Heartbeat(time.Microsecond))
		}, "bad option"},
		{"WatchNoOutcome", func(m sqlmock.Sqlmock) { mock.ExpectWatch(m, key, mock.LeaseFailed, advisory.WatchConfig{}) }, "not an outcome of Watch"},
		{"LockerStandby", func(m sqlmock.Sqlmock) {
			try := mock.ExpectLockerConn(m).ExpectAcquire(key, mock.LeaseStandby)
			try.Exec.WillReturnError(boom)
			try.Query.WillReturnError(boom)
		}, "not an outcome of a Locker's try"},
		{"LockKeysNone", func(m sqlmock.Sqlmock) { mock.ExpectLockKeys(m).WillReturnError(boom) }, "at least one key"},
		{"UnlockKeysNone", func(m sqlmock.Sqlmock) { mock.ExpectUnlockKeys(m) }, "at least one key"},
		{"XactLockKeysNone", func(m sqlmock.Sqlmock) { mock.ExpectXactLockKeys(m) }, "at least one key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			t.Run("New", func(t *testing.T) {
				t.Parallel()
				rec := &recordingTB{TB: t}
				_, m := mock.New(rec)
				tc.call(m)
				if len(rec.errors) != 1 || !strings.HasPrefix(rec.errors[0], "mock: ") ||
					!strings.Contains(rec.errors[0], tc.want) || !strings.Contains(rec.errors[0], "(called at mock_test.go:") {
					t.Errorf("the helper reported %q; want one error starting %q, containing %q and the test's line", rec.errors, "mock: ", tc.want)
				}
				rec.cleanup()
				if len(rec.errors) != 2 {
					t.Errorf("cleanup reported %q; want the unmet misuse", rec.errors[1:])
				}
			})
			t.Run("Sqlmock", func(t *testing.T) {
				t.Parallel()
				_, m := plain(t, false)
				tc.call(m)
				// The Locker's connection start comes before the
				// misuse, and is reported first.
				err := m.ExpectationsWereMet()
				if err == nil || tc.name != "LockerStandby" && !strings.Contains(err.Error(), tc.want) {
					t.Errorf("ExpectationsWereMet = %v; want the misuse, containing %q, first", err, tc.want)
				}
			})
		})
	}
}

// TestScopeMethodMisuse checks that a scope's method asked for a
// statement the call it expects never sends fails the test, naming the
// package, instead of panicking.
func TestScopeMethodMisuse(t *testing.T) {
	t.Parallel()
	key := advisory.Int64Key(1)
	for _, tc := range []struct {
		name string
		call func(m sqlmock.Sqlmock)
		want string
	}{
		{"TokenWithoutFencing", func(m sqlmock.Sqlmock) { mock.ExpectAcquire(m, key, mock.LeaseGranted).WithToken(3) }, "advisory.Fencing()"},
		{"TokenWithoutStart", func(m sqlmock.Sqlmock) {
			mock.ExpectAcquire(m, key, mock.LeaseFailed, advisory.Fencing()).WithToken(3)
		}, "LeaseFailed sends no lease start"},
		{"HeartbeatWithoutHeartbeat", func(m sqlmock.Sqlmock) {
			mock.ExpectWithSessionLock(m, key, mock.SessionGranted).ExpectHeartbeat(true).WillReturnError(errors.New("boom"))
		}, "advisory.Heartbeat()"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := &recordingTB{TB: t}
			_, m := mock.New(rec)
			tc.call(m)
			if len(rec.errors) != 1 || !strings.HasPrefix(rec.errors[0], "mock: ") || !strings.Contains(rec.errors[0], tc.want) {
				t.Errorf("the method reported %q; want one error starting %q and containing %q", rec.errors, "mock: ", tc.want)
			}
			rec.cleanup()
		})
	}
}

// TestMisuseFailsTheCodeUnderTest checks that after a misuse the code
// under test fails at its first statement with an error that names it, on
// a mock that has no test to report it to.
func TestMisuseFailsTheCodeUnderTest(t *testing.T) {
	t.Parallel()
	db, m := plain(t, false)
	mock.ExpectLockKeys(m)
	err := advisory.UnlockAll(context.Background(), conn(t, db))
	if err == nil || !strings.Contains(err.Error(), "ExpectLockKeys needs at least one key") {
		t.Errorf("UnlockAll after a misuse = %v; want an error naming it", err)
	}
}

func TestServerError(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("wrapped: %w", mock.ServerError("40P01"))
	var s interface{ SQLState() string }
	if !errors.As(err, &s) || s.SQLState() != "40P01" {
		t.Errorf("errors.As found no SQLSTATE 40P01 in %v", err)
	}
	if !strings.Contains(err.Error(), "40P01") {
		t.Errorf("%q does not name the SQLSTATE", err)
	}
}

func TestOutcomeString(t *testing.T) {
	t.Parallel()
	for o, want := range map[fmt.Stringer]string{
		mock.Commit: "Commit", mock.Rollback: "Rollback", mock.XactNotAcquired: "XactNotAcquired",
		mock.XactFailed: "XactFailed", mock.XactGranted: "XactGranted", mock.XactOutcome(0): "XactOutcome(0)",
		mock.Release: "Release", mock.SessionNotAcquired: "SessionNotAcquired", mock.SessionFailed: "SessionFailed",
		mock.SessionGranted: "SessionGranted", mock.SessionOutcome(9): "SessionOutcome(9)",
		mock.LeaseGranted: "LeaseGranted", mock.LeaseNotAcquired: "LeaseNotAcquired", mock.LeaseFailed: "LeaseFailed",
		mock.LeaseStandby: "LeaseStandby", mock.LeasePooler: "LeasePooler", mock.LeaseOutcome(7): "LeaseOutcome(7)",
	} {
		if got := o.String(); got != want {
			t.Errorf("%#v.String() = %q, want %q", o, got, want)
		}
	}
}
