package advisory

import (
	"context"
	"database/sql"

	"github.com/pgadvisory/pgadvisory/internal/scope"
)

// WithXactLock runs fn in a transaction that holds a transaction lock on
// key. It begins a transaction on db, takes the lock (waiting, unless
// [Try] or [Wait] says otherwise), runs fn, and commits if fn returns
// nil. It rolls back if taking the lock fails, if fn returns an error, or if
// fn panics, in which case the panic continues after the rollback. The lock
// is released when the transaction ends, so it can never outlive the call,
// and it works through any pool, PgBouncer's transaction mode included (on
// pgx, with the settings the application's own queries with arguments need
// there: default_query_exec_mode=exec, or PgBouncer's
// max_prepared_statements).
//
// fn must not commit tx itself: to commit before fn returns, for example to
// answer a client only once its work is durable, fn calls [CommitEarly]
// with the context it was given. fn may roll tx back itself, provided it
// then returns an error. A transaction that ended any other way is reported
// as an error, never as a success.
//
// If ctx ends while fn runs, database/sql rolls the transaction back at
// once, and the lock ends with it even though fn is still running: fn's
// database work is undone, but anything else fn does after that runs
// without the lock. (On pgx the driver closes the connection instead, and
// the server ends the transaction, and the lock, when it sees the
// connection gone: a moment after, possibly after WithXactLock returned,
// so that a retry at once may still find the key held.) fn should stop when ctx is done. Nothing is committed
// once ctx has ended, by WithXactLock or by [CommitEarly]: the transaction
// rolls back and the error matches ctx.Err(), even when fn returned nil,
// since fn's work was undone. ([WithSessionLock], which undoes nothing,
// returns fn's result instead.)
//
// When the lock is not granted the error matches [ErrNotAcquired] (with
// [Try]), [ErrLockTimeout] (with [Wait]), [ErrDeadlock], or ctx.Err(),
// and fn is not called. When fn fails, WithXactLock returns fn's error
// itself, joined with a rollback failure only if there was one. On a
// server that stops answering, the BEGIN, the lock, its wait and the
// COMMIT each return within ctx's deadline plus [AbortMargin], and the
// session is closed.
func WithXactLock(ctx context.Context, db *sql.DB, key Key, fn func(ctx context.Context, tx *sql.Tx) error, opts ...XactOption) error {
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
	return scope.WithXact(ctx, scope.DBPool{Pool: db}, key.sql(), fn, &o)
}

// WithXactLockTx is [WithXactLock] for a transaction the caller has
// already begun, such as one begun through another library's wrapper of
// *sql.DB. It takes over tx: it takes the lock, runs fn, and commits if fn
// returns nil, or rolls back otherwise; either way tx has ended when it
// returns, and so has the lock. [TxOptions] does not apply.
func WithXactLockTx(ctx context.Context, tx *sql.Tx, key Key, fn func(ctx context.Context, tx *sql.Tx) error, opts ...LockOption) error {
	if tx == nil {
		return errNilTx
	}
	if fn == nil {
		return scope.Join(errNilFunc, scope.Rollback(tx))
	}
	o, err := parse(opts)
	if err != nil {
		return scope.Join(err, scope.Rollback(tx))
	}
	return scope.Xact(ctx, tx, false, key.sql(), fn, &o, scope.TxForm(ctx, tx))
}

// NewTxContext returns a copy of ctx that carries tx, for [TxFromContext]
// to find. The scoped helpers do this for their fn already; use it to hand
// code under test a transaction of your own, or, with a nil tx, to hide an
// outer transaction from code that must run without one. [CommitEarly]
// refuses a context made here: the transaction is its maker's to end.
func NewTxContext(ctx context.Context, tx *sql.Tx) context.Context {
	return scope.NewTxContext(ctx, tx)
}

// TxFromContext returns the transaction of the [WithXactLock] or
// [WithXactLockTx] call whose fn received ctx (or a context derived from
// it), or the one [NewTxContext] put in ctx, and whether there was one.
// The transaction holds the scope's lock, which is released when the
// helper commits or rolls it back; code that finds it here must not end
// it. The transports, httplock and grpclock, hand their handlers such a
// context.
func TxFromContext(ctx context.Context) (*sql.Tx, bool) { return scope.TxFromContext(ctx) }

// CommitEarly commits the transaction of the [WithXactLock] or
// [WithXactLockTx] call whose fn received ctx (or a context derived from
// it), before fn returns, and so releases the lock. Use it to answer a
// client only once the work is committed, as package httplock does.
// After it, fn must not use the transaction; the helper then ends nothing
// more and returns fn's error, joined with CommitEarly's if the commit
// failed. Calling it again returns the first result. Outside such a fn it
// returns an error and commits nothing.
func CommitEarly(ctx context.Context) error { return scope.CommitEarly(ctx) }
