package scope

import (
	"context"
	"errors"
	"testing"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// TestFailWaitRefusal: a lock statement that the server refused (its check
// raised the refusal's SQLSTATE before it took anything, see
// internal/sqltext's guard.go) fails with ErrStandby or ErrSharedSession, whose
// message names the refusal and not the server's error; other failures
// keep the server's error.
func TestFailWaitRefusal(t *testing.T) {
	t.Parallel()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		err     error
		want    error
		wraps   bool // the result wraps err
		wantMsg string
	}{
		{name: "Standby", err: &waitErr{sqltext.StandbyState}, want: ErrStandby,
			wantMsg: "advisory: lock 42: " + ErrStandby.Error()[len("advisory: "):]},
		{name: "SharedSession", err: &waitErr{sqltext.SharedState}, want: ErrSharedSession,
			wantMsg: "advisory: lock 42: " + ErrSharedSession.Error()[len("advisory: "):] + ": " + errForeignMark.Error()},
		// A refusal is the server's answer, whatever ctx did since.
		{name: "StandbyAsCtxEnds", ctx: cancelled, err: &waitErr{sqltext.StandbyState}, want: ErrStandby},
		{name: "OtherState", err: &waitErr{"40P01"}, want: ErrDeadlock, wraps: true},
		{name: "ServerCancel", err: &waitErr{"57014"}, want: ErrLockTimeout, wraps: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := tt.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			err := FailWait(ctx, "lock", "42", tt.err)
			if !errors.Is(err, tt.want) {
				t.Fatalf("FailWait = %v; want %v", err, tt.want)
			}
			if errors.Is(err, tt.err) != tt.wraps {
				t.Errorf("FailWait = %q wraps the server's error: %v; want %v", err, !tt.wraps, tt.wraps)
			}
			if tt.wantMsg != "" && err.Error() != tt.wantMsg {
				t.Errorf("message\n got %q\nwant %q", err, tt.wantMsg)
			}
		})
	}
}

// TestRefusal: only the refusals' SQLSTATEs are refusals.
func TestRefusal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want error
	}{
		{&waitErr{sqltext.StandbyState}, ErrStandby},
		{&waitErr{sqltext.SharedState}, ErrSharedSession},
		{&waitErr{"55P03"}, nil},
		{errors.New("connection reset"), nil},
		{nil, nil},
	}
	for _, tt := range tests {
		if got := refusal(tt.err); got != tt.want {
			t.Errorf("refusal(%v) = %v; want %v", tt.err, got, tt.want)
		}
	}
}
