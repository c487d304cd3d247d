package sqlxlock

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jmoiron/sqlx"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/scope"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// Errors for bad arguments.
var (
	errNilDB   = errors.New("sqlxlock: nil *sqlx.DB")
	errNilFunc = errors.New("sqlxlock: nil fn")
)

// WithXactLock runs fn in a transaction that holds a transaction lock on
// key, as [advisory.WithXactLock] does, and hands fn the transaction as a
// *sqlx.Tx with db's driver name, mapper and unsafe flag. It begins the
// transaction on db, takes the lock (waiting, unless [advisory.Try] or
// [advisory.Timeout] says otherwise), runs fn, and commits if fn returns
// nil. It rolls back if taking the lock fails, if fn returns an error, or if
// fn panics, in which case the panic continues after the rollback. The lock
// is released when the transaction ends, so it never outlives the call.
//
// fn must not commit tx itself; to commit before it returns, it calls
// [advisory.CommitEarly] with the context it was given. The errors are
// advisory's: when the lock is not granted they match
// [advisory.ErrNotAcquired] (with [advisory.Try]), [advisory.ErrLockTimeout]
// (with [advisory.Timeout]), [advisory.ErrDeadlock], or ctx.Err(), and fn is
// not called.
func WithXactLock(ctx context.Context, db *sqlx.DB, key advisory.Key, fn func(ctx context.Context, tx *sqlx.Tx) error, opts ...advisory.Option) error {
	switch {
	case db == nil || db.DB == nil:
		return errNilDB
	case fn == nil:
		return errNilFunc
	}
	o, err := scope.Parse(opts)
	if err != nil {
		return err
	}
	tx, err := db.BeginTxx(ctx, o.TxOpts)
	if err != nil {
		return scope.Fail(ctx, "begin", "", err)
	}
	return scope.Xact(ctx, tx.Tx, sqltext.KeyOf(key), func(ctx context.Context, _ *sql.Tx) error { return fn(ctx, tx) }, &o)
}

// WithSessionLock runs fn on a dedicated connection that holds a session
// lock on key, as [advisory.WithSessionLock] does, and hands fn the
// connection as a *sqlx.Conn with db's driver name, mapper and unsafe flag.
// It takes a connection from db, takes the lock (waiting, unless
// [advisory.Try] or [advisory.Timeout] says otherwise), runs fn, and
// releases the lock when fn returns, even when ctx is cancelled by then. The
// lock is held only while fn runs.
//
// The connection goes back to the pool only when nothing is in doubt. After
// an interrupted or failed wait, a failed or refused release, ctx ending
// while fn ran, or a panic in fn, the session is closed instead, and the
// server drops whatever it held; a panic continues after that. When fn
// returns, the scope releases the lock and every other session lock fn took
// on conn. fn must not close conn, and transactions it begins with
// conn.BeginTxx must end before it returns. The errors are advisory's, as
// for [WithXactLock]; if the lock was gone when fn returned, the error
// matches [advisory.ErrLockLost].
func WithSessionLock(ctx context.Context, db *sqlx.DB, key advisory.Key, fn func(ctx context.Context, conn *sqlx.Conn) error, opts ...advisory.Option) error {
	switch {
	case db == nil || db.DB == nil:
		return errNilDB
	case fn == nil:
		return errNilFunc
	}
	o, err := scope.Parse(opts)
	if err != nil {
		return err
	}
	conn, err := db.Connx(ctx)
	if err != nil {
		return scope.Fail(ctx, "connect", "", err)
	}
	// The scope owns conn: it releases every session lock fn took and
	// closes conn, or discards the session when in doubt.
	return scope.Session(ctx, conn.Conn, sqltext.KeyOf(key), func(ctx context.Context, _ *sql.Conn) error { return fn(ctx, conn) }, &o, true)
}
