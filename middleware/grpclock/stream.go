package grpclock

import (
	"context"
	"database/sql"
	"errors"

	"google.golang.org/grpc"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/internal/reqlock"
)

// StreamServerInterceptor returns an interceptor that runs each streaming
// call in a transaction holding a transaction-level advisory lock on the
// key that key finds in the call's context, such as its metadata
// ([MetadataKey]). It behaves as [UnaryServerInterceptor] does: the
// handler finds the transaction with
// advisory.TxFromContext(stream.Context()), a nil error commits, an
// error or a panic rolls back, and [ErrNoLock] from key serves
// the stream without a transaction.
//
// The transaction, one of db's pooled connections and the lock are held
// for the stream's whole life, until the handler returns: a stream that
// stays open for minutes keeps every other call for the resource out, and
// a connection out of the pool, for minutes. For long-lived or
// bidirectional streams, lock per message instead: serve the stream
// without this interceptor (or with a key function that returns
// [ErrNoLock]) and call advisory.WithXactLock in the handler for
// each message.
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
	o := newOptions(opts)
	lockOpts := o.LockOptions()
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx := ss.Context()
		k, err := key(ctx, info.FullMethod)
		switch {
		case errors.Is(err, reqlock.ErrNoLock):
			return handler(srv, &serverStream{ServerStream: ss, ctx: advisory.NewTxContext(ctx, nil)})
		case err != nil:
			return keyStatus(err)
		}
		var herr error
		called, err := reqlock.Run(ctx, db, k, lockOpts, func(ctx context.Context, tx *sql.Tx) error {
			herr = handler(srv, &serverStream{ServerStream: ss, ctx: ctx})
			return herr
		})
		switch {
		case !called:
			return o.lockStatus(ctx, err)
		case herr != nil:
			return herr
		case err != nil:
			return commitStatus(ctx, err)
		}
		return nil
	}
}

// serverStream is a grpc.ServerStream whose context carries the call's
// transaction, or none.
type serverStream struct {
	grpc.ServerStream
	ctx context.Context
}

var _ grpc.ServerStream = (*serverStream)(nil)

// Context returns the stream's context with the transaction in it.
func (s *serverStream) Context() context.Context { return s.ctx }
