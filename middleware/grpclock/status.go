package grpclock

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware"
)

// The messages of the statuses the interceptors return. None carries SQL
// or a driver's message.
const (
	msgBusy        = "grpclock: resource busy: another call holds its lock; retry later"
	msgUnavailable = "grpclock: database unavailable"
	msgCommit      = "grpclock: commit failed; the call's work was rolled back"
	msgInternal    = "grpclock: internal error"
)

// keyStatus turns a key function's error into a status: its own, if it
// carries one, else codes.InvalidArgument with its message.
func keyStatus(err error) error {
	if s, ok := status.FromError(err); ok {
		return s.Err()
	}
	return status.Error(codes.InvalidArgument, err.Error())
}

// lockStatus turns an error from taking the lock into a status.
func lockStatus(err error) error {
	switch {
	case errors.Is(err, advisory.ErrNotAcquired), errors.Is(err, advisory.ErrLockTimeout):
		return status.Error(codes.Aborted, msgBusy)
	}
	return failStatus(err, msgInternal)
}

// commitStatus turns an error from the commit after a successful handler
// into a status.
func commitStatus(err error) error { return failStatus(err, msgCommit) }

// failStatus reports a database failure: the end of the call's context,
// an unreachable database, or else codes.Internal with msg.
func failStatus(err error, msg string) error {
	switch {
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "grpclock: "+context.Canceled.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "grpclock: "+context.DeadlineExceeded.Error())
	case middleware.IsUnavailable(err):
		return status.Error(codes.Unavailable, msgUnavailable)
	}
	return status.Error(codes.Internal, msg)
}
