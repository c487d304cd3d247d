package grpclock

import (
	"context"
	"database/sql"

	"google.golang.org/grpc"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware"
)

// UnaryServerInterceptor returns an interceptor that runs each unary call
// in a transaction holding a transaction-level advisory lock on the key
// that key finds in the call. Per call it computes the key, begins a
// transaction on db, takes the lock (without waiting, unless [Wait] says
// so), and calls the handler with the transaction in its context, where
// middleware.TxFromContext finds it. It commits if the handler returns a
// nil error, before the response is sent, and rolls back if the handler
// returns an error or panics; a panic continues after the rollback. The
// lock is released when the transaction ends.
//
// A busy lock fails the call with codes.Aborted without calling the
// handler; see the package documentation for every code. The handler's own
// error is returned as it is.
//
// UnaryServerInterceptor panics if db or key is nil.
func UnaryServerInterceptor(db *sql.DB, key KeyFunc, opts ...Option) grpc.UnaryServerInterceptor {
	switch {
	case db == nil:
		panic("grpclock: UnaryServerInterceptor: nil *sql.DB")
	case key == nil:
		panic("grpclock: UnaryServerInterceptor: nil KeyFunc")
	}
	lockOpts := lockOptions(opts)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		k, err := key(ctx, info.FullMethod, req)
		if err != nil {
			return nil, keyStatus(err)
		}
		var (
			resp    any
			herr    error
			handled bool
		)
		err = advisory.WithXactLock(ctx, db, k, func(ctx context.Context, tx *sql.Tx) error {
			handled = true
			resp, herr = handler(middleware.NewContext(ctx, tx), req)
			return herr
		}, lockOpts...)
		switch {
		case !handled:
			return nil, lockStatus(err)
		case herr != nil:
			return resp, herr
		case err != nil:
			return nil, commitStatus(err)
		}
		return resp, nil
	}
}
