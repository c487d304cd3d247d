package grpclock

import (
	"context"
	"errors"
	"strings"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/pgadvisory/pgadvisory/middleware/internal/reqlock"
)

// The messages of the statuses the interceptors return. None carries SQL,
// a driver's message, a Go type or a method name.
const (
	msgBadKey      = "grpclock: invalid lock key"
	msgBusy        = "grpclock: resource busy: another call holds its lock; retry later"
	msgUnavailable = "grpclock: database unavailable"
	msgCommit      = "grpclock: commit failed; the call's work was rolled back"
	msgInternal    = "grpclock: internal error"
	msgCanceled    = "grpclock: call canceled"
	msgDeadline    = "grpclock: call deadline exceeded"
)

// maxMessage caps the message of a bad-key status.
const maxMessage = 256

// statusError is the error the interceptors return for their own
// failures. gRPC sends its status, whose message is short and clean; the
// cause stays reachable with errors.Is and errors.As, for logs and for
// interceptors further out. Its Error text is the status's, like a
// status error's, and never the cause's, so that an interceptor that
// wraps it cannot leak the cause to the client.
type statusError struct {
	st    *status.Status
	cause error
}

var _ interface {
	error
	GRPCStatus() *status.Status
	Unwrap() error
} = (*statusError)(nil)

func (e *statusError) Error() string { return e.st.Err().Error() }

// GRPCStatus returns the status gRPC sends to the client.
func (e *statusError) GRPCStatus() *status.Status { return e.st }

// Unwrap returns the cause.
func (e *statusError) Unwrap() error { return e.cause }

// fail returns a statusError with code and msg for cause.
func fail(code codes.Code, msg string, cause error) error {
	return &statusError{st: status.New(code, msg), cause: cause}
}

// keyStatus turns a key function's error into a status error: a status
// the error carries keeps its code and its own message; an error matching
// [ErrBadKey] is codes.InvalidArgument with its message, which
// the key functions keep short and clean, capped all the same; any other
// error is codes.InvalidArgument with a fixed message.
func keyStatus(err error) error {
	if se, ok := err.(*statusError); ok {
		return se
	}
	var gs interface{ GRPCStatus() *status.Status }
	if errors.As(err, &gs) {
		if st := gs.GRPCStatus(); st != nil && st.Code() != codes.OK {
			return &statusError{st: st, cause: err}
		}
	}
	if errors.Is(err, reqlock.ErrBadKey) {
		return fail(codes.InvalidArgument, capMessage(err.Error()), err)
	}
	return fail(codes.InvalidArgument, msgBadKey, err)
}

// capMessage returns msg as valid UTF-8, cut at a rune boundary to at
// most maxMessage bytes.
func capMessage(msg string) string {
	msg = strings.ToValidUTF8(msg, "\uFFFD")
	if len(msg) <= maxMessage {
		return msg
	}
	cut := maxMessage
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "..."
}

// lockStatus turns an error from taking the lock under ctx into a status
// error: a busy lock is codes.Aborted, with a RetryInfo detail when o
// suggests a delay.
func (o *options) lockStatus(ctx context.Context, err error) error {
	err = reqlock.WithContext(ctx, err)
	if reqlock.Busy(err) && ctx.Err() == nil {
		st := status.New(codes.Aborted, msgBusy)
		if o.RetryAfter > 0 {
			if d, derr := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(o.RetryAfter)}); derr == nil {
				st = d
			}
		}
		return &statusError{st: st, cause: err}
	}
	return failStatus(err, msgInternal)
}

// commitStatus turns an error from the commit after a successful handler
// into a status error.
func commitStatus(ctx context.Context, err error) error {
	return failStatus(reqlock.WithContext(ctx, err), msgCommit)
}

// failStatus reports a database failure: the end of the call's context,
// an unreachable database, or else codes.Internal with msg.
func failStatus(err error, msg string) error {
	switch {
	case errors.Is(err, context.Canceled):
		return fail(codes.Canceled, msgCanceled, err)
	case errors.Is(err, context.DeadlineExceeded):
		return fail(codes.DeadlineExceeded, msgDeadline, err)
	case reqlock.Unavailable(err):
		return fail(codes.Unavailable, msgUnavailable, err)
	}
	return fail(codes.Internal, msg, err)
}
