package middleware_test

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
	"github.com/pgadvisory/pgadvisory/middleware"
)

func TestIsUnavailable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"Nil", nil, false},
		{"BadConn", fmt.Errorf("begin: %w", driver.ErrBadConn), true},
		{"ConnDone", sql.ErrConnDone, true},
		{"Dial", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true},
		{"DNS", &net.DNSError{Err: "no such host", Name: "db"}, true},
		{"ConnectionFailure", &sqlState{"08006", "connection failure"}, true},
		{"CannotConnect", &sqlState{"08001", "could not connect"}, true},
		{"AdminShutdown", &sqlState{"57P01", "terminating connection due to administrator command"}, true},
		{"CrashShutdown", &sqlState{"57P02", "crash"}, true},
		{"CannotConnectNow", &sqlState{"57P03", "the database system is starting up"}, true},
		{"IdleSessionTimeout", &sqlState{"57P05", "idle session timeout"}, true},
		{"QueryCanceled", &sqlState{"57014", "canceling statement"}, false},
		{"LockTimeout", &sqlState{"55P03", "lock timeout"}, false},
		{"Syntax", &sqlState{"42601", "syntax error"}, false},
		{"Canceled", context.Canceled, false},
		{"DeadlineExceeded", context.DeadlineExceeded, false},
		{"CanceledDuringDial", errors.Join(context.Canceled, &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}), false},
		{"NotAcquired", advisory.ErrNotAcquired, false},
		{"Plain", errors.New("boom"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := middleware.IsUnavailable(tt.err); got != tt.want {
				t.Errorf("IsUnavailable(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
