package httplock

import (
	"context"
	"errors"
	"fmt"

	"github.com/pgadvisory/pgadvisory/middleware/internal/reqlock"
)

// The errors a [KeyFunc] may return to steer [XactLock], and the classes
// of failure its error handler gets, besides advisory.ErrNotAcquired,
// advisory.ErrLockTimeout, context.Canceled and context.DeadlineExceeded.
// Match them with [errors.Is]; the cause stays reachable with [errors.As].
var (
	// ErrNoLock, returned (or wrapped) by a KeyFunc, says that the
	// request needs no lock: the handler is served at once, without a
	// transaction, and [advisory.TxFromContext] reports false in it.
	// grpclock.ErrNoLock has the same effect here, and this one there.
	ErrNoLock error = noLockError("httplock: no lock for this request")

	// ErrBadKey means the KeyFunc found no key in the request, as for a
	// missing or malformed path parameter. Every KeyFunc error other than
	// ErrNoLock matches it. No transaction was begun. The messages of
	// this package's key functions quote at most 32 bytes of the bad
	// value.
	ErrBadKey error = badKeyError("httplock: bad lock key")

	// ErrUnavailable means the database could not be reached, refused
	// the connection, or dropped it: a broken or closed connection, a
	// closed *sql.DB, a network error, or a server error of SQLSTATE
	// class 08, 53300 (too many connections) or 57P01 to 57P05 (admin or
	// crash shutdown, cannot connect now, database dropped, idle session
	// timeout). The handler was not called.
	ErrUnavailable = errors.New("httplock: database unavailable")

	// ErrCommit means the commit before the response failed, so the
	// handler's work was rolled back and its response was replaced.
	ErrCommit = errors.New("httplock: commit failed")
)

// noLockError is the type of [ErrNoLock]. It also matches the class that
// both transports test for, so that grpclock.ErrNoLock is honoured here
// and this one there.
type noLockError string

func (e noLockError) Error() string { return string(e) }

// Is reports whether target is the class of ErrNoLock.
func (noLockError) Is(target error) bool { return target == reqlock.ErrNoLock }

// badKeyError is the type of [ErrBadKey]. It also matches the class of
// bad-key errors that both transports test for.
type badKeyError string

func (e badKeyError) Error() string { return string(e) }

// Is reports whether target is the class of ErrBadKey.
func (badKeyError) Is(target error) bool { return target == reqlock.ErrBadKey }

// classify gives err, from taking the lock under ctx, the class the error
// handler sees: the end of the request's context, a busy lock, an
// unreachable database, or else err as it is.
func classify(ctx context.Context, err error) error {
	err = reqlock.WithContext(ctx, err)
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), reqlock.Busy(err):
		return err
	case reqlock.Unavailable(err):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// keyError makes a KeyFunc error match ErrBadKey. An error that already
// matches a bad-key sentinel, this package's or grpclock's, is kept.
func keyError(err error) error {
	if errors.Is(err, reqlock.ErrBadKey) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrBadKey, err)
}
