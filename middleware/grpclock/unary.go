package grpclock

import (
	"context"
	"database/sql"
	"errors"

	"google.golang.org/grpc"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/internal/reqlock"
)

// UnaryServerInterceptor returns an interceptor that runs each unary call
// in a transaction holding a transaction-level advisory lock on the key
// that key finds in the call. Per call it computes the key, begins a
// transaction on db, takes the lock (without waiting, unless [Wait] says
// so), and calls the handler with the transaction in its context, where
// advisory.TxFromContext finds it. It commits if the handler returns a
// nil error, before the response is sent, and rolls back if the handler
// returns an error or panics; a panic continues after the rollback. A
// call whose context has ended by the time the handler returns nil is
// rolled back too, and fails with codes.Canceled or
// codes.DeadlineExceeded. The
// lock is released when the transaction ends. A key function that returns
// [ErrNoLock] has the call served without a transaction.
//
// A busy lock fails the call with codes.Aborted without calling the
// handler; see the package documentation for every code. The handler's own
// error is returned as it is. Each call holds one of db's connections
// while its handler runs.
//
// UnaryServerInterceptor panics if db or key is nil.
func UnaryServerInterceptor(db *sql.DB, key KeyFunc, opts ...Option) grpc.UnaryServerInterceptor {
	switch {
	case db == nil:
		panic("grpclock: UnaryServerInterceptor: nil *sql.DB")
	case key == nil:
		panic("grpclock: UnaryServerInterceptor: nil KeyFunc")
	}
	o := newOptions(opts)
	lockOpts := o.LockOptions()
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		k, err := key(ctx, info.FullMethod, req)
		switch {
		case errors.Is(err, reqlock.ErrNoLock):
			return handler(advisory.NewTxContext(ctx, nil), req)
		case err != nil:
			return nil, keyStatus(err)
		}
		var (
			resp any
			herr error
		)
		called, err := reqlock.Run(ctx, db, k, lockOpts, func(ctx context.Context, tx *sql.Tx) error {
			resp, herr = handler(ctx, req)
			return herr
		})
		switch {
		case !called:
			return nil, o.lockStatus(ctx, err)
		case herr != nil:
			return resp, herr
		case err != nil:
			return nil, commitStatus(ctx, err)
		}
		return resp, nil
	}
}
