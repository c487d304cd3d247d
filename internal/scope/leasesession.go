package scope

import "context"

// A SessionExec sends a statement without arguments on a session that a
// [LeaseSession.Use] call has to itself, and returns the rows it
// affected. It trusts no success while ctx is done, as [run] does, and on
// a server that does not answer it returns within ctx's deadline plus
// [AbortMargin].
type SessionExec func(ctx context.Context, query string) (int64, error)

// A LeaseSession is the session a lease holds its lock on. Beyond a
// [ScopeSession], the lease's heartbeat needs the session to itself for
// each beat, and to end it at once after a loss.
type LeaseSession interface {
	ScopeSession
	// Use runs f with the session to itself: on database/sql, once a
	// statement of the caller's on the same connection is done, so that
	// the wait for it counts against no bound of f's. A close of the
	// session that races Use makes it return an error instead of
	// running f.
	Use(f func(exec SessionExec)) error
	// End ends the server session at once, whatever transaction is open
	// on it, and leaves the session failing every statement until the
	// lease gives it back with Close or Discard.
	End()
}

// A SessionSource opens sessions of a pool: a lease's, to undo its lock
// and mark from another session after a loss that closed its own.
type SessionSource interface {
	// OpenSession returns a session of the pool, which the caller gives
	// back with Close, or Discard and Close when in doubt.
	OpenSession(ctx context.Context) (ScopeSession, error)
}
