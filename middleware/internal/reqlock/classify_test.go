package reqlock_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/internal/reqlock"
	"github.com/pgadvisory/pgadvisory/mock"
)

func TestUnavailable(t *testing.T) {
	t.Parallel()
	// The error database/sql returns for a closed *sql.DB, which it does
	// not export.
	closed, _ := mock.New(t)
	closed.Close()
	_, errClosed := closed.Begin()

	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"Nil", nil, false},
		{"BadConn", fmt.Errorf("begin: %w", driver.ErrBadConn), true},
		{"ConnDone", sql.ErrConnDone, true},
		{"DBClosed", errClosed, true},
		{"DBClosedWrapped", fmt.Errorf("advisory: begin: %w", errClosed), true},
		{"DBClosedJoined", errors.Join(errors.New("x"), errClosed), true},
		{"DBClosedLookalike", errors.New("sql: database is closed, or so it says"), false},
		{"Dial", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true},
		{"DNS", &net.DNSError{Err: "no such host", Name: "db"}, true},
		{"ConnectionFailure", mock.ServerError("08006"), true},
		{"CannotConnect", mock.ServerError("08001"), true},
		{"TooManyConnections", mock.ServerError("53300"), true},
		{"OutOfMemory", mock.ServerError("53200"), false},
		{"AdminShutdown", mock.ServerError("57P01"), true},
		{"CrashShutdown", mock.ServerError("57P02"), true},
		{"CannotConnectNow", mock.ServerError("57P03"), true},
		{"IdleSessionTimeout", mock.ServerError("57P05"), true},
		{"QueryCanceled", mock.ServerError("57014"), false},
		{"LockTimeout", mock.ServerError("55P03"), false},
		{"Syntax", mock.ServerError("42601"), false},
		{"Canceled", context.Canceled, false},
		{"DeadlineExceeded", context.DeadlineExceeded, false},
		{"CanceledDuringDial", errors.Join(context.Canceled, &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}), false},
		{"NotAcquired", advisory.ErrNotAcquired, false},
		{"Plain", errors.New("boom"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := reqlock.Unavailable(tt.err); got != tt.want {
				t.Errorf("Unavailable(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestBusy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"Nil", nil, false},
		{"NotAcquired", fmt.Errorf("x: %w", advisory.ErrNotAcquired), true},
		{"LockTimeout", errors.Join(advisory.ErrLockTimeout, errors.New("rollback")), true},
		{"Deadlock", advisory.ErrDeadlock, false},
		{"Canceled", context.Canceled, false},
	}
	for _, tt := range tests {
		if got := reqlock.Busy(tt.err); got != tt.want {
			t.Errorf("%s: Busy(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

func TestWithContext(t *testing.T) {
	t.Parallel()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	errDriver := errors.New("canceling statement due to user request")
	tests := []struct {
		name      string
		ctx       context.Context
		err       error
		canceled  bool
		keepsCase bool // the result still matches err
	}{
		{"LiveContext", context.Background(), errDriver, false, true},
		{"EndedContext", cancelled, errDriver, true, true},
		{"AlreadyMatches", cancelled, fmt.Errorf("x: %w", context.Canceled), true, true},
		{"TxDone", cancelled, sql.ErrTxDone, true, true},
	}
	for _, tt := range tests {
		got := reqlock.WithContext(tt.ctx, tt.err)
		if errors.Is(got, context.Canceled) != tt.canceled || !errors.Is(got, tt.err) {
			t.Errorf("%s: WithContext(%v) = %v", tt.name, tt.err, got)
		}
	}
	if reqlock.WithContext(cancelled, nil) != nil {
		t.Error("WithContext(nil) is not nil")
	}
}
