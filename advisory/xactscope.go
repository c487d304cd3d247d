package advisory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
)

// WithXactLock runs fn in a transaction that holds a transaction lock on
// key. It begins a transaction on db, takes the lock (waiting, unless
// [Try] or [Timeout] says otherwise), runs fn, and commits if fn returns
// nil. It rolls back if taking the lock fails, if fn returns an error, or if
// fn panics, in which case the panic continues after the rollback. The lock
// is released when the transaction ends, so it can never outlive the call,
// and it works through any pool, PgBouncer's transaction mode included.
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
// without the lock. fn should stop when ctx is done. Nothing is committed
// once ctx has ended, by WithXactLock or by [CommitEarly]: the transaction
// rolls back and the error matches ctx.Err().
//
// When the lock is not granted the error matches [ErrNotAcquired] (with
// [Try]), [ErrLockTimeout] (with [Timeout]), [ErrDeadlock], or ctx.Err(),
// and fn is not called. When fn fails, WithXactLock returns fn's error
// itself, joined with a rollback failure only if there was one.
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
	return withXactLockTx(ctx, tx, key, fn, o)
}

// WithXactLockTx is [WithXactLock] for a transaction the caller has
// already begun, such as one begun through another library's wrapper of
// *sql.DB. It takes over tx: it takes the lock, runs fn, and commits if fn
// returns nil, or rolls back otherwise; either way tx has ended when it
// returns, and so has the lock. [TxOptions] does not apply.
func WithXactLockTx(ctx context.Context, tx *sql.Tx, key Key, fn func(ctx context.Context, tx *sql.Tx) error, opts ...Option) error {
	if tx == nil {
		return errNilTx
	}
	if fn == nil {
		return join(errNilFunc, rollback(tx))
	}
	o, err := newOptions(opts)
	if err != nil {
		return join(err, rollback(tx))
	}
	return withXactLockTx(ctx, tx, key, fn, o)
}

func withXactLockTx(ctx context.Context, tx *sql.Tx, key Key, fn func(ctx context.Context, tx *sql.Tx) error, o *options) error {
	finished := false
	defer func() {
		// fn panicked or called runtime.Goexit: the panic goes on, with
		// its own stack, after the rollback.
		if !finished {
			_ = tx.Rollback()
		}
	}()

	op, stmt := o.lockStatement(true, key)
	acquired, err := xactAcquire(ctx, tx, op, []Key{key}, stmt) // only a try reports a row count
	if err == nil && o.try && !acquired {
		err = failKind(op, key.String(), ErrNotAcquired, nil)
	}
	if err != nil {
		finished = true
		return join(err, rollback(tx))
	}

	scope := &xactScope{tx: tx, owned: true}
	err = fn(context.WithValue(ctx, xactScopeKey{}, scope), tx)
	finished = true
	if early, commitErr := scope.outcome(); early {
		return join(err, commitErr)
	}
	if err != nil {
		return join(err, rollback(tx))
	}
	return commit(ctx, tx)
}

// commit commits tx unless ctx has ended. database/sql rolls back a
// transaction whose context ended, but from a goroutine of its own, so a
// commit could still win that race; here the rollback wins every time.
func commit(ctx context.Context, tx *sql.Tx) error {
	if err := ctx.Err(); err != nil {
		_ = tx.Rollback()
		return fail(ctx, "commit", "", err)
	}
	if err := tx.Commit(); err != nil {
		return fail(ctx, "commit", "", err)
	}
	return nil
}

// xactScope is what a WithXactLock call keeps in its fn's context, so that
// fn can find its transaction with [TxFromContext] and commit early with
// [CommitEarly]. [NewTxContext] makes one that no helper owns.
type xactScope struct {
	tx    *sql.Tx
	owned bool // made by a scoped helper, which reads the outcome

	mu        sync.Mutex
	committed bool  // CommitEarly ran
	err       error // and returned this
}

type xactScopeKey struct{}

// outcome reports whether CommitEarly ran, and what it returned.
func (s *xactScope) outcome() (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.committed, s.err
}

// errNoScope is returned by CommitEarly outside a WithXactLock fn.
var errNoScope = errors.New("advisory: CommitEarly called outside the fn of WithXactLock")

// NewTxContext returns a copy of ctx that carries tx, for [TxFromContext]
// to find. The scoped helpers do this for their fn already; use it to hand
// code under test a transaction of your own, or, with a nil tx, to hide an
// outer transaction from code that must run without one. [CommitEarly]
// refuses a context made here: the transaction is its maker's to end.
func NewTxContext(ctx context.Context, tx *sql.Tx) context.Context {
	return context.WithValue(ctx, xactScopeKey{}, &xactScope{tx: tx})
}

// TxFromContext returns the transaction of the [WithXactLock] or
// [WithXactLockTx] call whose fn received ctx (or a context derived from
// it), or the one [NewTxContext] put in ctx, and whether there was one.
// The transaction holds the scope's lock, which is released when the
// helper commits or rolls it back; code that finds it here must not end
// it. The transports (httplock, grpclock) hand their handlers such a
// context.
func TxFromContext(ctx context.Context) (*sql.Tx, bool) {
	s, ok := ctx.Value(xactScopeKey{}).(*xactScope)
	if !ok || s.tx == nil {
		return nil, false
	}
	return s.tx, true
}

// CommitEarly commits the transaction of the [WithXactLock] or
// [WithXactLockTx] call whose fn received ctx (or a context derived from
// it), before fn returns, and so releases the lock. Use it to answer a
// client only once the work is committed, as package middleware does.
// After it, fn must not use the transaction; the helper then ends nothing
// more and returns fn's error, joined with CommitEarly's if the commit
// failed. Calling it again returns the first result.
func CommitEarly(ctx context.Context) error {
	s, ok := ctx.Value(xactScopeKey{}).(*xactScope)
	if !ok || !s.owned {
		return errNoScope
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.committed {
		s.committed = true
		s.err = commit(ctx, s.tx)
	}
	return s.err
}

// rollback ends tx, reporting only a failure that says something: a
// transaction that ctx or fn already ended is not one.
func rollback(tx *sql.Tx) error {
	if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("advisory: rollback: %w", err)
	}
	return nil
}

// join returns err itself when extra is nil, so that a caller can still
// compare fn's error with ==, and both otherwise.
func join(err, extra error) error {
	switch {
	case extra == nil:
		return err
	case err == nil:
		return extra
	}
	return errors.Join(err, extra)
}
