package reqlock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// Run runs fn as advisory.WithXactLock(ctx, db, key, fn, opts...) does,
// and reports whether fn was called. When it was not, err says why the
// lock could not be had. When it was, err is WithXactLock's: fn's own
// error, or the commit's.
//
// fn is not called when ctx has ended by the time the lock is granted,
// and fn's work is not committed when ctx has ended by the time fn
// returns nil: either way the transaction rolls back, and err matches
// ctx.Err(). A request whose client has gone away commits nothing.
func Run(ctx context.Context, db *sql.DB, key advisory.Key, opts []advisory.Option,
	fn func(ctx context.Context, tx *sql.Tx) error) (called bool, err error) {
	err = advisory.WithXactLock(ctx, db, key, func(ctx context.Context, tx *sql.Tx) error {
		// advisory reports a context that ended with the lock statement
		// as the statement's failure; this keeps the promise whatever
		// advisory does.
		if err := ctx.Err(); err != nil {
			return err
		}
		called = true
		if err := fn(ctx, tx); err != nil {
			return err
		}
		// database/sql rolls back a transaction whose context ended, but
		// in a goroutine of its own: a commit that comes first succeeds.
		return ctx.Err()
	}, opts...)
	return called, err
}

// Commit commits tx early, through advisory.CommitEarly, unless ctx has
// ended: then it rolls tx back and returns an error matching ctx.Err(), so
// that the work of a request whose client has gone away is never
// committed. ctx must be the context that [Run] gave fn, or one derived
// from it. database/sql would roll such a transaction back on its own,
// but from a goroutine of its own, so that a commit racing it could still
// succeed.
func Commit(ctx context.Context, tx *sql.Tx) error {
	if err := ctx.Err(); err != nil {
		_ = tx.Rollback()
		return err
	}
	return advisory.CommitEarly(ctx)
}

// WithContext returns err made to match ctx.Err() when ctx has ended: a
// statement that fails because the request ended may report something
// else, such as sql.ErrTxDone or a driver's "query canceled".
func WithContext(ctx context.Context, err error) error {
	cerr := ctx.Err()
	if err == nil || cerr == nil || errors.Is(err, cerr) {
		return err
	}
	return fmt.Errorf("%w: %w", cerr, err)
}
