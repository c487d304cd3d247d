package advisory

import (
	"database/sql"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/scope"
)

// An Option changes how the scoped helpers ([WithXactLock],
// [WithXactLockTx], [WithSessionLock], [WithSessionLockConn]) take their
// lock. By default they wait for an exclusive lock for as long as ctx
// allows.
type Option func(*scope.Options)

// Try makes the helper give up at once, with an error matching
// [ErrNotAcquired], when another session holds the key. fn is not called.
func Try() Option { return func(o *scope.Options) { o.Try = true } }

// Timeout bounds the wait for the lock to d, enforced by the server with
// lock_timeout; a wait that runs out returns an error matching
// [ErrLockTimeout]. It costs no extra round trip: a free key is taken by
// the first statement, and each statement of a wait for a busy key (see
// [WaitSlice]) sets its bound and puts the previous setting back, so no
// later statement, in fn or on the pooled session, sees it. d must be
// positive and at most math.MaxInt32 milliseconds; it is rounded up to
// whole milliseconds. ctx can still end the wait sooner.
func Timeout(d time.Duration) Option {
	return func(o *scope.Options) { o.Bounded, o.Timeout = true, d }
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
func WaitSlice(d time.Duration) Option {
	return func(o *scope.Options) { o.Slice, o.Sliced = d, true }
}

// Shared takes a shared lock instead of an exclusive one. Shared locks on a
// key coexist with each other and exclude exclusive ones.
func Shared() Option { return func(o *scope.Options) { o.Shared = true } }

// TxOptions sets the isolation level and read-only flag of the transaction
// that [WithXactLock] begins. [WithXactLockTx], whose transaction is begun
// already, and the session helpers ignore it.
func TxOptions(opts *sql.TxOptions) Option { return func(o *scope.Options) { o.TxOpts = opts } }
