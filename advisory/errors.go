package advisory

import (
	"context"
	"errors"
	"strings"
)

// The errors a lock operation reports. Match them with [errors.Is]. The
// driver's own error stays reachable with [errors.As], and a cancelled or
// expired context with errors.Is(err, context.Canceled) or
// errors.Is(err, context.DeadlineExceeded).
var (
	// ErrNotAcquired means a try found the key held by another session.
	// Nothing was taken.
	ErrNotAcquired = errors.New("advisory: lock not acquired")

	// ErrLockTimeout means the server ended a wait before the lock was
	// granted: a bounded wait ([Timeout]) ran out (SQLSTATE 55P03), or the
	// server cancelled the waiting statement while ctx was still live
	// (SQLSTATE 57014), as a statement_timeout shorter than the wait does.
	ErrLockTimeout = errors.New("advisory: lock wait timed out")

	// ErrDeadlock means the server broke a deadlock by failing this wait
	// (SQLSTATE 40P01). Take several keys with one call, such as
	// [LockKeys], to avoid deadlocks among advisory locks.
	ErrDeadlock = errors.New("advisory: deadlock detected")

	// ErrNotHeld means an unlock found that the session did not hold the
	// key.
	ErrNotHeld = errors.New("advisory: lock not held")

	// ErrLockLost means a session lock was no longer held when
	// [WithSessionLock] or [WithSessionLockConn] went to release it, so fn
	// may have run without it.
	ErrLockLost = errors.New("advisory: lock lost before release")

	// ErrLockTableFull means the server's shared lock table is full
	// (SQLSTATE 53200). It holds max_locks_per_transaction ×
	// (max_connections + max_prepared_transactions) locks; raise
	// max_locks_per_transaction, or take fewer keys at once.
	ErrLockTableFull = errors.New("advisory: lock table full; raise max_locks_per_transaction")
)

// Errors for bad arguments.
var (
	errNilConn = errors.New("advisory: nil *sql.Conn")
	errNilTx   = errors.New("advisory: nil *sql.Tx")
	errNilDB   = errors.New("advisory: nil *sql.DB")
	errNilFunc = errors.New("advisory: nil fn")
	errNoKeys  = errors.New("advisory: no keys given")
)

// sqlState returns the SQLSTATE of the first error in err's tree that
// carries one, whatever the driver, or "".
func sqlState(err error) string {
	var e interface{ SQLState() string }
	if errors.As(err, &e) {
		return e.SQLState()
	}
	return ""
}

// opError is a failed lock operation: what was done, to which keys, the
// class of failure, and the cause.
type opError struct {
	op   string // "lock", "try lock", "unlock", ...
	keys string // "42", "[1:2 42]" or ""
	kind error  // one of our sentinels, a context error, or nil
	err  error  // the driver's error, or nil
}

func (e *opError) Error() string {
	var b strings.Builder
	b.WriteString("advisory: ")
	b.WriteString(e.op)
	if e.keys != "" {
		b.WriteString(" ")
		b.WriteString(e.keys)
	}
	if e.kind != nil {
		b.WriteString(": ")
		b.WriteString(strings.TrimPrefix(e.kind.Error(), "advisory: "))
	}
	if e.err != nil {
		b.WriteString(": ")
		b.WriteString(e.err.Error())
	}
	return b.String()
}

func (e *opError) Unwrap() []error {
	errs := make([]error, 0, 2)
	if e.kind != nil {
		errs = append(errs, e.kind)
	}
	if e.err != nil {
		errs = append(errs, e.err)
	}
	return errs
}

// fail classifies err, which came from operation op on keys under ctx.
// Server errors map to our sentinels by SQLSTATE; anything else that
// happened while ctx was done also reports ctx's error.
func fail(ctx context.Context, op, keys string, err error) error {
	e := &opError{op: op, keys: keys, err: err}
	switch sqlState(err) {
	case "55P03":
		e.kind = ErrLockTimeout
	case "40P01":
		e.kind = ErrDeadlock
	case "53200":
		e.kind = ErrLockTableFull
	}
	if ctxErr := ctx.Err(); e.kind == nil && ctxErr != nil {
		e.kind = ctxErr
		if err == ctxErr {
			e.err = nil
		}
	}
	return e
}

// failWait classifies err, which came from a lock wait, as fail does, and
// also reports a wait that the server cancelled while ctx was still live
// (SQLSTATE 57014, as a statement_timeout shorter than the wait gives) as
// [ErrLockTimeout]: to the caller, the server bounded the wait.
func failWait(ctx context.Context, op, keys string, err error) error {
	if sqlState(err) == "57014" && ctx.Err() == nil {
		return failKind(op, keys, ErrLockTimeout, err)
	}
	return fail(ctx, op, keys, err)
}

// failKind reports a failure whose class is already known.
func failKind(op, keys string, kind, err error) error {
	return &opError{op: op, keys: keys, kind: kind, err: err}
}
