package advisory

import (
	"errors"

	"github.com/pgadvisory/pgadvisory/internal/scope"
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
	// granted: a bounded wait ([Wait]) ran out (SQLSTATE 55P03), or the
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

	// ErrLockLost means a session lock could not be confirmed held when
	// [WithSessionLock] or [WithSessionLockConn] went to release it: the
	// server said it was not held, or the session no longer answered (its
	// backend was terminated, the server restarted, the connection broke).
	// fn may have run without the lock for part of its length.
	ErrLockLost = errors.New("advisory: lock lost")

	// ErrLockTableFull means the server's shared lock table is full
	// (SQLSTATE 53200). It holds max_locks_per_transaction ×
	// (max_connections + max_prepared_transactions) locks; raise
	// max_locks_per_transaction, or take fewer keys at once.
	ErrLockTableFull = errors.New("advisory: lock table full; raise max_locks_per_transaction")

	// ErrStandby means a lock call found the server to be a hot standby,
	// where advisory locks are local to the standby and coordinate nothing
	// with the primary. Every call that takes a lock, of a session or a
	// transaction, checks it in the statement that takes the lock. Nothing
	// is held.
	ErrStandby = errors.New("advisory: the server is a hot standby, where advisory locks coordinate nothing with the primary")

	// ErrSharedSession means a lock call found its session shared with
	// other clients, as behind a transaction pooler such as PgBouncer in
	// transaction mode: a lease's confirming statement ran on a backend
	// that did not hold the key, or a lock call landed on a backend that
	// bears the mark of another client's lease, where the lease's key
	// would be granted to it too. Nothing is held. Use transaction locks
	// through such a pooler, and leases through a session-mode pool or a
	// direct connection.
	ErrSharedSession = errors.New("advisory: the session is shared: a transaction pooler (such as PgBouncer in transaction mode) sits between the client and the server, and session locks cannot work through it")

	// ErrUnsupportedEngine means the server's engine cannot make the lock
	// real: CockroachDB, whose session lock functions lock nothing (and
	// whose transaction ones lock nothing before 26.3), YugabyteDB without
	// its advisory locks turned on, a Citus worker, or Supavisor for
	// session locks. The first lock call on a *sql.DB identifies the
	// engine, with one round trip, and later calls send nothing to know
	// it; a refused call sends nothing more and takes nothing. The error
	// is an [*EngineError], which names the engine and says why; see
	// docs/engines.md.
	ErrUnsupportedEngine = errors.New("advisory: the server's advisory locks are not real")

	// ErrLockerClosed is returned by [Locker.Acquire] after [Locker.Close].
	ErrLockerClosed = errors.New("advisory: locker closed")

	// ErrBadOption means an option's value is out of range, such as a
	// negative [Wait] or a [Heartbeat] under a millisecond. Nothing was
	// sent to the server.
	ErrBadOption = errors.New("advisory: bad option")
)

// An EngineError refuses a lock on an engine where it cannot be real. It
// names the engine (Engine, Version) and says why and what to do instead
// (Reason). It matches [ErrUnsupportedEngine] with [errors.Is]; reach it
// with [errors.As].
type EngineError struct {
	// Engine is the engine's name, such as "CockroachDB", "YugabyteDB",
	// "Citus" or "Supavisor".
	Engine string
	// Version is the engine's version as it gives it, or "".
	Version string
	// Reason says why the lock cannot be real, and what to do instead.
	Reason string
}

// Error returns "advisory: ", the engine and its version, and the reason.
func (e *EngineError) Error() string {
	name := e.Engine
	if e.Version != "" {
		name += " " + e.Version
	}
	return "advisory: " + name + ": " + e.Reason
}

// Unwrap returns [ErrUnsupportedEngine].
func (e *EngineError) Unwrap() error { return ErrUnsupportedEngine }

// The engine reports advisory's own values, so that go doc shows each as
// it is, and every error from a lock call matches them.
func init() {
	scope.UseErrors(scope.Errors{
		NotAcquired:       ErrNotAcquired,
		LockTimeout:       ErrLockTimeout,
		Deadlock:          ErrDeadlock,
		NotHeld:           ErrNotHeld,
		LockLost:          ErrLockLost,
		LockTableFull:     ErrLockTableFull,
		Standby:           ErrStandby,
		SharedSession:     ErrSharedSession,
		UnsupportedEngine: ErrUnsupportedEngine,
		LockerClosed:      ErrLockerClosed,
		BadOption:         ErrBadOption,
		Engine: func(engine, version, reason string) error {
			return &EngineError{Engine: engine, Version: version, Reason: reason}
		},
	})
}

// Errors for bad arguments.
var (
	errNilConn = scope.ErrNilConn
	errNilTx   = scope.ErrNilTx
	errNilDB   = scope.ErrNilDB
	errNilFunc = scope.ErrNilFunc
	errNoKeys  = scope.ErrNoKeys
)
