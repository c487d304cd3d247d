package grpclock

import (
	"fmt"

	"github.com/pgadvisory/pgadvisory/middleware/internal/reqlock"
)

// The errors a [KeyFunc] or [StreamKeyFunc] may return to steer the
// interceptors. Match them with [errors.Is].
var (
	// ErrNoLock, returned (or wrapped) by a key function, says that the
	// call needs no lock: the handler is served at once, without a
	// transaction, and advisory.TxFromContext reports false in it.
	// httplock.ErrNoLock has the same effect here, and this one there.
	ErrNoLock error = noLockError("grpclock: no lock for this request")

	// ErrBadKey means the key function found no key in the call, as for
	// an unset field or a malformed metadata value. The key functions of
	// this package return errors that match it; the call fails with
	// codes.InvalidArgument and the error's message, which they keep
	// short and free of secrets: a key function of your own that wraps
	// ErrBadKey must do the same. No transaction was begun.
	ErrBadKey error = badKeyError("grpclock: bad lock key")
)

// noLockError is the type of [ErrNoLock]. It also matches the class that
// both transports test for, so that httplock.ErrNoLock is honoured here
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

// badKey makes err, which says why a call names no key, match ErrBadKey.
func badKey(err error) error { return fmt.Errorf("%w: %w", ErrBadKey, err) }
