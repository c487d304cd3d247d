package advisory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// WithXactLock runs fn in a transaction that holds a transaction lock on
// key. It begins a transaction on db, takes the lock (waiting, unless
// [Try] or [Timeout] says otherwise), runs fn, and commits if fn returns
// nil. It rolls back if taking the lock fails, if fn returns an error, or if
// fn panics, in which case the panic continues after the rollback. The lock
// is released when the transaction ends, so it can never outlive the call,
// and it works through any pool, PgBouncer's transaction mode included.
//
// fn may end tx itself, for example to commit before it answers a client;
// WithXactLock then leaves the transaction as fn ended it and returns fn's
// result. If fn returns nil but ctx ended the transaction first,
// WithXactLock returns an error wrapping ctx.Err().
//
// When the lock is not granted the error matches [ErrNotAcquired] (with
// [Try]), [ErrLockTimeout] (with [Timeout]), [ErrDeadlock], or ctx.Err(),
// and fn is not called.
func WithXactLock(ctx context.Context, db *sql.DB, key Key, fn func(ctx context.Context, tx *sql.Tx) error, opts ...Option) error {
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
	tx, err := db.BeginTx(ctx, o.txOpts)
	if err != nil {
		return fail(ctx, "begin", "", err)
	}
	return withXactLockTx(ctx, tx, key, func(ctx context.Context) error { return fn(ctx, tx) }, o)
}

// WithXactLockTx is [WithXactLock] for a transaction the caller has
// already begun, such as one begun through another library's wrapper of
// *sql.DB. It takes over tx: it takes the lock, runs fn, and commits if fn
// returns nil, or rolls back otherwise; either way tx has ended when it
// returns, and so has the lock. [TxOptions] does not apply.
func WithXactLockTx(ctx context.Context, tx *sql.Tx, key Key, fn func(ctx context.Context) error, opts ...Option) error {
	if tx == nil {
		return errNilTx
	}
	if fn == nil {
		return errors.Join(errNilFunc, rollback(tx))
	}
	o, err := newOptions(opts)
	if err != nil {
		return errors.Join(err, rollback(tx))
	}
	return withXactLockTx(ctx, tx, key, fn, o)
}

func withXactLockTx(ctx context.Context, tx *sql.Tx, key Key, fn func(ctx context.Context) error, o *options) error {
	finished := false
	defer func() {
		// fn panicked or called runtime.Goexit: the panic goes on, with
		// its own stack, after the rollback.
		if !finished {
			_ = tx.Rollback()
		}
	}()

	op, stmt := o.lockStatement(true, key)
	acquired, err := xactAcquire(ctx, tx, op, key.String(), stmt) // only a try reports a row count
	if err == nil && o.try && !acquired {
		err = failKind(op, key.String(), ErrNotAcquired, nil)
	}
	if err != nil {
		finished = true
		return errors.Join(err, rollback(tx))
	}

	err = fn(ctx)
	finished = true
	if err != nil {
		return errors.Join(err, rollback(tx))
	}
	if err := tx.Commit(); err != nil {
		if !errors.Is(err, sql.ErrTxDone) || ctx.Err() != nil {
			return fail(ctx, "commit", "", err)
		}
		// fn ended the transaction itself.
	}
	return nil
}

// rollback ends tx, reporting only a failure that says something: a
// transaction that ctx or fn already ended is not one.
func rollback(tx *sql.Tx) error {
	if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("advisory: rollback: %w", err)
	}
	return nil
}

// WithSessionLock runs fn on a dedicated connection that holds a session
// lock on key. It takes a *sql.Conn from db, takes the lock (waiting,
// unless [Try] or [Timeout] says otherwise), runs fn, and releases the lock
// when fn returns, even when ctx is cancelled by then. The lock is held
// only while fn runs.
//
// The connection goes back to the pool only when nothing is in doubt: the
// lock was not granted, or it was released cleanly. After an interrupted
// wait, a failed or refused release, or a panic in fn, WithSessionLock
// closes the session instead, and the server drops whatever it held. A
// panic continues after that. fn must not close conn: that would return
// the session to the pool with the lock.
//
// Use it for work that must span several transactions, or that must hold
// a lock while it waits on something outside the database; otherwise
// prefer [WithXactLock]. Session locks do not work through PgBouncer's
// transaction mode.
//
// When the lock is not granted the error matches [ErrNotAcquired],
// [ErrLockTimeout], [ErrDeadlock], or ctx.Err(), and fn is not called. If
// the lock was gone when fn returned, the error matches [ErrLockLost].
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
	defer conn.Close()
	return withSessionLockConn(ctx, conn, key, func(ctx context.Context) error { return fn(ctx, conn) }, o)
}

// WithSessionLockConn is [WithSessionLock] for a connection the caller
// already holds: it takes the lock on conn, runs fn, and releases the lock
// when fn returns. The caller still closes conn afterwards. Whenever the
// outcome is in doubt, it closes the session as WithSessionLock does, and
// conn then reports [sql.ErrConnDone].
func WithSessionLockConn(ctx context.Context, conn *sql.Conn, key Key, fn func(ctx context.Context) error, opts ...Option) error {
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
	return withSessionLockConn(ctx, conn, key, fn, o)
}

func withSessionLockConn(ctx context.Context, conn *sql.Conn, key Key, fn func(ctx context.Context) error, o *options) error {
	op, stmt := o.lockStatement(false, key)
	acquired, err := acquire(ctx, conn, op, key.String(), stmt) // only a try reports a row count
	if err != nil {
		return err
	}
	if o.try && !acquired {
		return failKind(op, key.String(), ErrNotAcquired, nil)
	}

	finished := false
	defer func() {
		if !finished {
			discard(conn) // fn panicked or called runtime.Goexit
		}
	}()
	fnErr := fn(ctx)
	finished = true

	unlockOp := "unlock"
	if o.shared {
		unlockOp = "unlock shared"
	}
	relErr := release(ctx, conn, unlockOp, []Key{key}, sqltext.Unlock(o.shared, key.sqlArg()))
	if errors.Is(relErr, ErrNotHeld) {
		relErr = failKind(unlockOp, key.String(), ErrLockLost, nil)
	}
	return errors.Join(fnErr, relErr)
}
