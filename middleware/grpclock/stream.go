package grpclock

import (
	"context"
	"database/sql"

	"google.golang.org/grpc"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware"
)

// StreamServerInterceptor returns an interceptor that runs each streaming
// call in a transaction holding a transaction-level advisory lock on the
// key that key finds in the call's context, such as its metadata
// ([MetadataKey]). It behaves as [UnaryServerInterceptor] does: the handler
// finds the transaction with middleware.TxFromContext(stream.Context()),
// a nil error commits, and an error or a panic rolls back.
//
// Messages the handler sends reach the client as they are sent, before the
// commit; only the call's final status says whether the work was
// committed. A client must treat the stream's messages as provisional until
// it sees codes.OK.
//
// StreamServerInterceptor panics if db or key is nil.
func StreamServerInterceptor(db *sql.DB, key StreamKeyFunc, opts ...Option) grpc.StreamServerInterceptor {
	switch {
	case db == nil:
		panic("grpclock: StreamServerInterceptor: nil *sql.DB")
	case key == nil:
		panic("grpclock: StreamServerInterceptor: nil StreamKeyFunc")
	}
	lockOpts := lockOptions(opts)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		k, err := key(ss.Context(), info.FullMethod)
		if err != nil {
			return keyStatus(err)
		}
		var (
			herr    error
			handled bool
		)
		err = advisory.WithXactLock(ss.Context(), db, k, func(ctx context.Context, tx *sql.Tx) error {
			handled = true
			herr = handler(srv, &serverStream{ServerStream: ss, ctx: middleware.NewContext(ctx, tx)})
			return herr
		}, lockOpts...)
		switch {
		case !handled:
			return lockStatus(err)
		case herr != nil:
			return herr
		case err != nil:
			return commitStatus(err)
		}
		return nil
	}
}

// serverStream is a grpc.ServerStream whose context carries the call's
// transaction.
type serverStream struct {
	grpc.ServerStream
	ctx context.Context
}

var _ grpc.ServerStream = (*serverStream)(nil)

// Context returns the stream's context with the transaction in it.
func (s *serverStream) Context() context.Context { return s.ctx }
