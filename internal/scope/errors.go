package scope

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// The sentinels that package advisory exports under the same names; see
// their documentation there. advisory defines its own, so that its
// documentation shows them as they are, and hands them to the engine with
// [UseErrors] as it initializes. These are the engine's until then, with
// the same messages: only the engine's own tests, which do not import
// advisory, see them. ErrStandby and ErrSharedSession are in lease.go,
// ErrUnsupportedEngine in engine.go, ErrLockerClosed in mux.go,
// ErrBadOption in options.go.
var (
	ErrNotAcquired   = errors.New("advisory: lock not acquired")
	ErrLockTimeout   = errors.New("advisory: lock wait timed out")
	ErrDeadlock      = errors.New("advisory: deadlock detected")
	ErrNotHeld       = errors.New("advisory: lock not held")
	ErrLockLost      = errors.New("advisory: lock lost")
	ErrLockTableFull = errors.New("advisory: lock table full; raise max_locks_per_transaction")
)

// Errors are the values a front end exports for the engine's sentinels,
// and how it presents an [EngineError].
type Errors struct {
	NotAcquired, LockTimeout, Deadlock, NotHeld, LockLost, LockTableFull error
	Standby, SharedSession, UnsupportedEngine, LockerClosed, BadOption   error

	// Engine returns the front's error for an engine where a lock cannot
	// be real. It must match UnsupportedEngine with errors.Is.
	Engine func(engine, version, reason string) error
}

// frontEngineError is Errors.Engine, once a front end gave it.
var frontEngineError func(engine, version, reason string) error

// UseErrors makes the engine report e's values instead of its own: every
// error it returns from then on matches them with errors.Is, and none
// matches the engine's own. Package advisory calls it from its init,
// before any call can run; it is not safe to call concurrently with calls
// into the engine. A nil value in e leaves the engine's own in place.
func UseErrors(e Errors) {
	use := func(v *error, front error) {
		if front != nil {
			*v = front
		}
	}
	use(&ErrNotAcquired, e.NotAcquired)
	use(&ErrLockTimeout, e.LockTimeout)
	use(&ErrDeadlock, e.Deadlock)
	use(&ErrNotHeld, e.NotHeld)
	use(&ErrLockLost, e.LockLost)
	use(&ErrLockTableFull, e.LockTableFull)
	use(&ErrStandby, e.Standby)
	use(&ErrSharedSession, e.SharedSession)
	use(&ErrUnsupportedEngine, e.UnsupportedEngine)
	use(&ErrLockerClosed, e.LockerClosed)
	use(&errLockerClosed, e.LockerClosed) // a closed Mux's leases' cause, the same value
	use(&ErrBadOption, e.BadOption)
	if e.Engine != nil {
		frontEngineError = e.Engine
	}
}

// Errors for bad arguments.
var (
	ErrNilConn = errors.New("advisory: nil *sql.Conn")
	ErrNilTx   = errors.New("advisory: nil *sql.Tx")
	ErrNilDB   = errors.New("advisory: nil *sql.DB")
	ErrNilFunc = errors.New("advisory: nil fn")
	ErrNoKeys  = errors.New("advisory: no keys given")
)

// errTxLeftOpen is reported when a session scope's fn returned with a
// transaction still open on its connection.
var errTxLeftOpen = errors.New("advisory: fn returned with a transaction still open on conn; " +
	"the session was closed to release the lock, and the connection is freed when that transaction ends")

// SQLState returns the SQLSTATE of the first error in err's tree that
// carries one, whatever the driver, or "".
func SQLState(err error) string {
	var e interface{ SQLState() string }
	if errors.As(err, &e) {
		return e.SQLState()
	}
	return ""
}

// OpError is a failed lock operation: what was done, to which keys, the
// class of failure, and the cause. It matches Kind and Err with errors.Is
// and errors.As.
type OpError struct {
	Op   string // "lock", "try lock", "unlock", ...
	Keys string // "42", "[1:2 42]" or ""
	Kind error  // one of the sentinels, a context error, or nil
	Err  error  // the driver's error, or nil
}

func (e *OpError) Error() string {
	var b strings.Builder
	b.WriteString("advisory: ")
	b.WriteString(e.Op)
	if e.Keys != "" {
		b.WriteString(" ")
		b.WriteString(e.Keys)
	}
	if e.Kind != nil {
		b.WriteString(": ")
		b.WriteString(strings.TrimPrefix(e.Kind.Error(), "advisory: "))
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns Kind and Err, those that are set.
func (e *OpError) Unwrap() []error {
	errs := make([]error, 0, 2)
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// Fail classifies err, which came from operation op on keys under ctx.
// Server errors map to the sentinels by SQLSTATE; anything else that
// happened while ctx was done also reports ctx's error.
func Fail(ctx context.Context, op, keys string, err error) error {
	e := &OpError{Op: op, Keys: keys, Err: err}
	switch SQLState(err) {
	case "55P03":
		e.Kind = ErrLockTimeout
	case "40P01":
		e.Kind = ErrDeadlock
	case "53200":
		e.Kind = ErrLockTableFull
	}
	if ctxErr := ctx.Err(); e.Kind == nil && ctxErr != nil {
		e.Kind = ctxErr
		if err == ctxErr {
			e.Err = nil
		}
	}
	return e
}

// FailWait classifies err, which came from a lock wait, as Fail does, and
// also reports a wait that the server cancelled while ctx was still live
// (SQLSTATE 57014, as a statement_timeout shorter than the wait gives) as
// [ErrLockTimeout]: to the caller, the server bounded the wait.
func FailWait(ctx context.Context, op, keys string, err error) error {
	switch refusal(err) {
	case ErrStandby:
		// The server's error is the check's device, not its news.
		return FailKind(op, keys, ErrStandby, nil)
	case ErrSharedSession:
		return FailKind(op, keys, ErrSharedSession, errForeignMark)
	}
	if SQLState(err) == "57014" && ctx.Err() == nil {
		return FailKind(op, keys, ErrLockTimeout, err)
	}
	return Fail(ctx, op, keys, err)
}

// FailKind reports a failure whose class is already known. An
// [*EngineError] kind becomes the front end's error for it ([UseErrors]).
func FailKind(op, keys string, kind, err error) error {
	if ee, ok := kind.(*EngineError); ok && frontEngineError != nil {
		kind = frontEngineError(ee.Engine, ee.Version, ee.Reason)
	}
	return &OpError{Op: op, Keys: keys, Kind: kind, Err: err}
}

// KeyList renders keys for an error message: "42", "[1:2 42]", or, for a
// long list, its first keys and how many more there are.
func KeyList(keys []sqltext.Key) string {
	const most = 8
	if len(keys) == 1 {
		return keys[0].String()
	}
	var b strings.Builder
	b.WriteByte('[')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		if i == most {
			b.WriteString("and ")
			b.WriteString(strconv.Itoa(len(keys) - most))
			b.WriteString(" more")
			break
		}
		b.WriteString(k.String())
	}
	b.WriteByte(']')
	return b.String()
}

// Join returns err itself when extra is nil, so that a caller can still
// compare fn's error with ==, and both otherwise.
func Join(err, extra error) error {
	switch {
	case extra == nil:
		return err
	case err == nil:
		return extra
	}
	return errors.Join(err, extra)
}
