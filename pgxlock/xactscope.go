package pgxlock

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/scope"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// WithXactLock runs fn in a transaction that holds a transaction lock on
// key. It begins a transaction on pool, takes the lock (waiting, unless
// [advisory.Try] or [advisory.Wait] says otherwise), runs fn, and commits
// if fn returns nil. It rolls back if taking the lock fails, if fn returns
// an error, or if fn panics, in which case the panic continues after the
// rollback. The lock is released when the transaction ends, so it can
// never outlive the call, and the connection goes back to the pool
// holding nothing. It is [advisory.WithXactLock] for pgx: the options, the
// errors and the waits are the same.
//
// [advisory.TxOptions] sets the transaction's isolation level and
// read-only flag, as pgx.TxOptions's IsoLevel and AccessMode; an isolation
// level PostgreSQL does not have is an error matching
// [advisory.ErrBadOption].
//
// fn must not commit tx itself: to commit before fn returns, fn calls
// [advisory.CommitEarly] with the context it was given. fn may roll tx
// back itself, provided it then returns an error. A transaction that
// ended any other way is reported as an error, never as a success.
//
// pgx does not roll a transaction back when ctx ends; the statement fn is
// running then fails, and pgx closes the connection, which ends the
// transaction and the lock on the server a moment later. Nothing is
// committed once ctx has ended: the transaction rolls back and the error
// matches ctx.Err(), even when fn returned nil.
//
// When the lock is not granted the error matches [advisory.ErrNotAcquired]
// (with Try), [advisory.ErrLockTimeout] (with Wait), [advisory.ErrDeadlock],
// [advisory.ErrStandby] (the server is a hot standby), or ctx.Err(), and fn
// is not called. When fn fails, WithXactLock returns fn's error itself,
// joined with a rollback failure only if there was one.
func WithXactLock(ctx context.Context, pool *pgxpool.Pool, key advisory.Key, fn func(ctx context.Context, tx pgx.Tx) error, opts ...advisory.XactOption) error {
	switch {
	case pool == nil:
		return errNilPool
	case fn == nil:
		return errNilFunc
	}
	o, err := scope.ParseOf(opts)
	if err != nil {
		return err
	}
	txo, err := pgxTxOptions(o.TxOpts)
	if err != nil {
		return err
	}
	// A scope refused for a stale mark on its backend, before fn ran,
	// removes the mark through another connection of the pool and begins
	// again, once, as advisory.WithXactLock does.
	ran := false
	k := sqltext.KeyOf(key)
	once := func() error {
		tx, err := pool.BeginTx(ctx, txo)
		if err != nil {
			return scope.FailBegin(ctx, k.String(), err)
		}
		return scope.XactScope(ctx, transaction(tx), true, k, func(ctx context.Context) error {
			ran = true
			return fn(ctx, tx)
		}, &o, sqltext.Params)
	}
	err = once()
	if !ran && scope.RefusedForMark(ctx, err) && healPool(ctx, pool) {
		err = once()
	}
	return err
}

// healPool removes a stale mark from a backend of pool's: see
// [scope.HealMark].
func healPool(ctx context.Context, pool *pgxpool.Pool) bool {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return false
	}
	defer conn.Release()
	return scope.HealMark(ctx, session(conn))
}

// WithXactLockTx is [WithXactLock] for a transaction the caller has
// already begun, on a *pgx.Conn, a *pgxpool.Conn or a pool. It takes over
// tx: it takes the lock, runs fn, and commits if fn returns nil, or rolls
// back otherwise; either way tx has ended when it returns, and so has the
// lock. A wait for a busy key runs each slice under a savepoint of tx's.
func WithXactLockTx(ctx context.Context, tx pgx.Tx, key advisory.Key, fn func(ctx context.Context, tx pgx.Tx) error, opts ...advisory.LockOption) error {
	t := transaction(tx)
	if t == nil {
		return errNilTx
	}
	if fn == nil {
		return scope.Join(errNilFunc, rollback(tx))
	}
	o, err := scope.ParseOf(opts)
	if err != nil {
		return scope.Join(err, rollback(tx))
	}
	return scope.XactScope(ctx, t, false, sqltext.KeyOf(key), func(ctx context.Context) error { return fn(ctx, tx) }, &o, sqltext.Params)
}

// TxFromContext returns the transaction of the [WithXactLock] or
// [WithXactLockTx] call whose fn received ctx (or a context derived from
// it), and whether there was one. The transaction holds the scope's lock,
// which is released when the helper commits or rolls it back; code that
// finds it here must not end it. A scope of package advisory's, on
// database/sql, is not found here: [advisory.TxFromContext] finds it.
func TxFromContext(ctx context.Context) (pgx.Tx, bool) {
	t, _, ok := scope.ScopeTx(ctx)
	if !ok {
		return nil, false
	}
	pt, ok := t.(*pgxTx)
	if !ok {
		return nil, false
	}
	return pt.tx, true
}

// rollback ends tx, a transaction the caller handed over, reporting only
// a failure that says something.
func rollback(tx pgx.Tx) error {
	if err := transaction(tx).Rollback(context.Background()); err != nil {
		return fmt.Errorf("pgxlock: rollback: %w", err)
	}
	return nil
}

// pgxTxOptions returns the pgx.TxOptions of opts, database/sql's options
// as [advisory.TxOptions] gives them: the isolation level and the access
// mode. PostgreSQL has no other isolation levels.
func pgxTxOptions(opts *sql.TxOptions) (pgx.TxOptions, error) {
	var txo pgx.TxOptions
	if opts == nil {
		return txo, nil
	}
	switch opts.Isolation {
	case sql.LevelDefault:
	case sql.LevelReadUncommitted:
		txo.IsoLevel = pgx.ReadUncommitted
	case sql.LevelReadCommitted:
		txo.IsoLevel = pgx.ReadCommitted
	case sql.LevelRepeatableRead:
		txo.IsoLevel = pgx.RepeatableRead
	case sql.LevelSerializable:
		txo.IsoLevel = pgx.Serializable
	default:
		return txo, fmt.Errorf("%w: isolation level %v has no PostgreSQL equivalent", advisory.ErrBadOption, opts.Isolation)
	}
	if opts.ReadOnly {
		txo.AccessMode = pgx.ReadOnly
	}
	return txo, nil
}
