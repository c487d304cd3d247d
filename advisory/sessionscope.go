package advisory

import (
	"context"
	"database/sql"

	"github.com/pgadvisory/pgadvisory/internal/scope"
)

// WithSessionLock runs fn on a dedicated connection that holds a session
// lock on key. It takes a *sql.Conn from db, takes the lock (waiting,
// unless [Try] or [Wait] says otherwise), runs fn, and releases the lock
// when fn returns, even when ctx has ended by then. Any other session lock
// fn took on conn is released with it, since the connection goes back to
// the pool.
//
// It returns nil only when fn returned nil and the lock was still held
// when fn returned, so that fn ran under the lock for its whole length. If
// the lock could not be confirmed then (the server said it was not held,
// or the session no longer answered, as after its backend was terminated
// or the server restarted), the error matches [ErrLockLost], whatever fn
// returned. A lock lost while fn runs is found only when fn returns: fn
// learns of it sooner only by using conn.
//
// fn's context ends when fn returns. A transaction fn began on it and left
// open is rolled back; the scope reports any transaction left open on conn
// as an error that names the mistake, and closes the session at once so
// that the lock is released, even when the transaction was begun on
// another context. fn must not close conn, which would return the session
// to the pool with the lock.
//
// The connection goes back to the pool only when nothing is in doubt: a
// Try found the key held elsewhere, or the lock was released cleanly while
// ctx was live. After an interrupted or failed wait, a failed or refused
// release, ctx ending while fn ran, or a panic in fn, the session is
// closed instead, and the server drops whatever it held. A panic in fn
// first releases the lock, with one statement, if the session still
// answers; the panic goes on once the lock is released or the session
// closed.
//
// If ctx ends while fn runs, WithSessionLock still returns fn's result
// when the lock was held until fn returned: unlike [WithXactLock], whose
// transaction ctx rolls back, nothing fn did is undone, so fn's own error
// says whether it finished. fn should stop when ctx is done.
//
// Use it for work that must span several transactions, or that must hold
// a lock while it waits on something outside the database; otherwise
// prefer [WithXactLock]. Session locks do not work through PgBouncer's
// transaction mode.
//
// When the lock is not granted the error matches [ErrNotAcquired],
// [ErrLockTimeout], [ErrDeadlock], or ctx.Err(), and fn is not called.
// When fn fails, WithSessionLock returns fn's error itself, joined with a
// release failure only if there was one. On a server that stops
// answering, the lock and its wait return within ctx's deadline plus
// [AbortMargin], and the release after fn within ten seconds plus
// AbortMargin, whatever ctx; the session is then closed.
func WithSessionLock(ctx context.Context, db *sql.DB, key Key, fn func(ctx context.Context, conn *sql.Conn) error, opts ...SessionOption) error {
	switch {
	case db == nil:
		return errNilDB
	case fn == nil:
		return errNilFunc
	}
	o, err := parse(opts)
	if err != nil {
		return err
	}
	return scope.WithSession(ctx, scope.DBPool{Pool: db}, key.sql(), fn, &o)
}

// WithSessionLockConn is [WithSessionLock] for a connection the caller
// already holds: it takes the lock on conn, runs fn, and releases the lock
// when fn returns. It releases key only, and leaves conn open for the
// caller to close. Whenever the outcome is in doubt, it closes the session
// as WithSessionLock does, and conn then reports [sql.ErrConnDone]. When
// fn left a transaction open on conn, the session is closed under it at
// once, and the lock with it; conn then fails every statement, and its
// Close waits, as database/sql's always does, for that transaction to end.
func WithSessionLockConn(ctx context.Context, conn *sql.Conn, key Key, fn func(ctx context.Context, conn *sql.Conn) error, opts ...SessionOption) error {
	switch {
	case conn == nil:
		return errNilConn
	case fn == nil:
		return errNilFunc
	}
	o, err := parse(opts)
	if err != nil {
		return err
	}
	return scope.SessionScope(ctx, conn, key.sql(), fn, &o, false)
}
