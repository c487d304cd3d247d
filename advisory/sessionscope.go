package advisory

import (
	"context"
	"database/sql"
	"errors"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// WithSessionLock runs fn on a dedicated connection that holds a session
// lock on key. It takes a *sql.Conn from db, takes the lock (waiting,
// unless [Try] or [Timeout] says otherwise), runs fn, and releases the lock
// when fn returns, even when ctx is cancelled by then. The lock is held
// only while fn runs. Any other session lock fn took on conn is released
// with it, since the connection goes back to the pool.
//
// The connection goes back to the pool only when nothing is in doubt: a
// Try found the key held elsewhere, or the lock was released cleanly.
// After an interrupted or failed wait, a failed or refused release, ctx
// ending while fn ran, or a panic in fn, WithSessionLock closes the
// session instead, and the server drops whatever it held. A panic
// continues after that. fn must not close conn, which would return the
// session to the pool with the lock, and must end every transaction it
// begins on conn before it returns, since database/sql cannot release a
// connection with an open transaction.
//
// Use it for work that must span several transactions, or that must hold
// a lock while it waits on something outside the database; otherwise
// prefer [WithXactLock]. Session locks do not work through PgBouncer's
// transaction mode.
//
// When the lock is not granted the error matches [ErrNotAcquired],
// [ErrLockTimeout], [ErrDeadlock], or ctx.Err(), and fn is not called. If
// the lock was gone when fn returned, the error matches [ErrLockLost]; if
// the connection itself was lost by then, as after a server restart, the
// error is the driver's, and the lock is gone too. When fn fails,
// WithSessionLock returns fn's error itself, joined with a release failure
// only if there was one.
func WithSessionLock(ctx context.Context, db *sql.DB, key Key, fn func(ctx context.Context, conn *sql.Conn) error, opts ...Option) error {
	switch {
	case db == nil:
		return errNilDB
	case fn == nil:
		return errNilFunc
	}
	o, err := newOptions(opts)
	if err != nil {
		return err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return fail(ctx, "connect", "", err)
	}
	return withSessionLockConn(ctx, conn, key, fn, o, true)
}

// WithSessionLockConn is [WithSessionLock] for a connection the caller
// already holds: it takes the lock on conn, runs fn, and releases the lock
// when fn returns. It releases key only, and leaves conn open for the
// caller to close. Whenever the outcome is in doubt, it closes the session
// as WithSessionLock does, and conn then reports [sql.ErrConnDone].
func WithSessionLockConn(ctx context.Context, conn *sql.Conn, key Key, fn func(ctx context.Context, conn *sql.Conn) error, opts ...Option) error {
	switch {
	case conn == nil:
		return errNilConn
	case fn == nil:
		return errNilFunc
	}
	o, err := newOptions(opts)
	if err != nil {
		return err
	}
	return withSessionLockConn(ctx, conn, key, fn, o, false)
}

// withSessionLockConn runs a session scope on conn. When owned, the scope
// took conn for itself: it releases every session lock at the end, not key
// alone, and closes conn, which returns the session to the pool unless it
// was discarded.
func withSessionLockConn(ctx context.Context, conn *sql.Conn, key Key, fn func(ctx context.Context, conn *sql.Conn) error, o *options, owned bool) error {
	done := func() {
		if owned {
			_ = conn.Close()
		}
	}
	op, stmt := o.lockStatement(false, key)
	acquired, err := acquire(ctx, conn, op, []Key{key}, stmt) // only a try reports a row count
	if err == nil && o.try && !acquired {
		err = failKind(op, key.String(), ErrNotAcquired, nil)
	}
	if err != nil {
		done()
		return err
	}

	finished := false
	defer func() {
		if !finished {
			// fn panicked or called runtime.Goexit. Close the session
			// elsewhere: a transaction fn left open on conn would make
			// the close wait for it, and the panic must go on now.
			go func() {
				discard(conn)
				done()
			}()
		}
	}()
	fnErr := fn(ctx, conn)
	finished = true

	unlockOp := "unlock"
	if o.shared {
		unlockOp = "unlock shared"
	}
	var relErr error
	switch {
	case ctx.Err() != nil:
		// ctx ended while fn ran. The driver may have dropped the session
		// already, or sent a cancel that could still hit a release; closing
		// the session releases the lock for certain.
		discard(conn)
	case owned:
		relErr = release(ctx, conn, unlockOp, []Key{key}, sqltext.Release(o.shared, key.sql()))
	default:
		relErr = release(ctx, conn, unlockOp, []Key{key}, sqltext.Unlock(o.shared, key.sql()))
	}
	if errors.Is(relErr, ErrNotHeld) {
		relErr = failKind(unlockOp, key.String(), ErrLockLost, nil)
	}
	done()
	return join(fnErr, relErr)
}
