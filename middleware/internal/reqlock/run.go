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
// error, or the commit's. Like WithXactLock, it calls fn only if ctx is
// live when the lock is granted, and commits nothing once ctx has ended,
// so a request whose client has gone away commits nothing.
func Run(ctx context.Context, db *sql.DB, key advisory.Key, opts []advisory.XactOption,
	fn func(ctx context.Context, tx *sql.Tx) error) (called bool, err error) {
	err = advisory.WithXactLock(ctx, db, key, func(ctx context.Context, tx *sql.Tx) error {
		called = true
		return fn(ctx, tx)
	}, opts...)
	return called, err
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
