package advisory

import (
	"database/sql"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/scope"
)

// The option types are sealed interfaces, one per kind of call (see the
// package documentation's Options). Every option applies to the same
// unexported settings; the marker methods only say where it may go.

// An XactOption configures [WithXactLock]: a [LockOption], or [TxOptions].
type XactOption interface {
	apply(*scope.Options)
	xactOption()
}

// A SessionOption configures [WithSessionLock] and [WithSessionLockConn]:
// a [LockOption], or [Heartbeat]. Every SessionOption is also a
// [LeaseOption].
type SessionOption interface {
	LeaseOption
	sessionOption()
}

// A LeaseOption configures [Acquire]: a [LockOption], [Heartbeat] or
// [Fencing].
type LeaseOption interface {
	apply(*scope.Options)
	leaseOption()
}

// A LockerOption configures [Locker.Acquire]: a [LockOption], or
// [Fencing]. Every LockerOption is also a [LeaseOption].
type LockerOption interface {
	LeaseOption
	lockerOption()
}

// A LockOption changes how a lock is taken. Every call that takes a lock
// with options accepts it: [WithXactLock], [WithXactLockTx],
// [WithSessionLock], [WithSessionLockConn], [Acquire] and
// [Locker.Acquire]. [WithXactLockTx] accepts nothing else. By default a
// call waits for an exclusive lock for as long as its context allows.
type LockOption interface {
	XactOption
	SessionOption
	LockerOption
}

// The concrete options, one type per set of calls an option applies to.
type (
	lockOption    func(*scope.Options) // every call that takes a lock
	xactOption    func(*scope.Options) // WithXactLock only
	sessionOption func(*scope.Options) // the session scopes and Acquire
	lockerOption  func(*scope.Options) // Locker.Acquire and Acquire
)

func (f lockOption) apply(o *scope.Options) { f(o) }
func (lockOption) xactOption()              {}
func (lockOption) sessionOption()           {}
func (lockOption) leaseOption()             {}
func (lockOption) lockerOption()            {}

func (f xactOption) apply(o *scope.Options) { f(o) }
func (xactOption) xactOption()              {}

func (f sessionOption) apply(o *scope.Options) { f(o) }
func (sessionOption) sessionOption()           {}
func (sessionOption) leaseOption()             {}

func (f lockerOption) apply(o *scope.Options) { f(o) }
func (lockerOption) lockerOption()            {}
func (lockerOption) leaseOption()             {}

// Try makes the call give up at once, with an error matching
// [ErrNotAcquired], when another session holds the key; a scoped helper
// then does not call fn. Try is Wait(0): of several Try and [Wait]
// options, the last one counts.
func Try() LockOption { return lockOption(setTry) }

// setTry is Try's setting, a function of its own so that Try allocates
// nothing.
func setTry(o *scope.Options) { o.Try, o.Bounded, o.Timeout = true, false, 0 }

// Wait bounds the wait for the lock to d. Wait(0) does not wait, as
// [Try]; with neither, a call waits for as long as its context allows. Of
// several Try and Wait options, the last one counts.
//
// The server enforces the bound with lock_timeout; a wait that runs out
// returns an error matching [ErrLockTimeout]. It costs no extra round
// trip: a free key is taken by the first statement, and each statement of
// a wait for a busy key (see [WaitSlice]) sets its bound and puts the
// previous setting back, so no later statement, in fn or on the pooled
// session, sees it. d must not be negative, and at most math.MaxInt32
// milliseconds; it is rounded up to whole milliseconds. ctx can still end
// the wait sooner.
func Wait(d time.Duration) LockOption {
	if d == 0 {
		return Try()
	}
	return lockOption(func(o *scope.Options) { o.Try, o.Bounded, o.Timeout = false, true, d })
}

// WaitSlice bounds each statement of a wait for a busy key to d: the
// server waits in slices, each a statement of its own under lock_timeout,
// so that no statement of the wait holds a snapshot for longer. A
// statement that waits keeps the snapshot it started with, and while it
// does, VACUUM cannot remove the rows deleted since, and CREATE INDEX
// CONCURRENTLY cannot finish. A slice is never shorter than a little more
// than the session's deadlock_timeout (deadlock_timeout plus a tenth, at
// least 100 ms), so that the server still detects deadlocks: with
// PostgreSQL's defaults the default of 1 second makes slices of 1.1 s.
// Between two slices a waiter leaves the server's queue for the key for
// one round trip, and joins it again at its end. An uncontended lock never
// waits, and costs one statement whatever d is. d must be at least a
// millisecond; docs/waiting.md says what a wait costs the server.
func WaitSlice(d time.Duration) LockOption {
	return lockOption(func(o *scope.Options) { o.Slice, o.Sliced = d, true })
}

// Shared takes a shared lock instead of an exclusive one. Shared locks on a
// key coexist with each other and exclude exclusive ones.
func Shared() LockOption { return lockOption(setShared) }

// setShared is Shared's setting.
func setShared(o *scope.Options) { o.Shared = true }

// TxOptions sets the isolation level and read-only flag of the transaction
// that [WithXactLock] begins.
func TxOptions(opts *sql.TxOptions) XactOption {
	return xactOption(func(o *scope.Options) { o.TxOpts = opts })
}

// option is what every option type has in common.
type option interface{ apply(*scope.Options) }

// parse applies opts, in order, to the zero settings and checks them.
func parse[O option](opts []O) (scope.Options, error) {
	return scope.Parse(opts, func(opt O, o *scope.Options) { opt.apply(o) })
}

func init() {
	// mock and sqlxlock take advisory's options for the calls they mirror
	// or wrap, and read them through the engine.
	scope.ApplyOption = func(opt any, o *scope.Options) bool {
		if opt, ok := opt.(option); ok {
			opt.apply(o)
			return true
		}
		return false
	}
}
