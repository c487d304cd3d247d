// Package grpclock provides gRPC server interceptors that coordinate
// concurrent calls for the same resource with a PostgreSQL
// transaction-level advisory lock, derived from the request message or
// the call's metadata. It is the gRPC counterpart of package middleware,
// and the only package of this module that imports google.golang.org/grpc.
//
// # Use
//
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(grpclock.UnaryServerInterceptor(db, grpclock.FieldKey(ordersNS, "order_id"))),
//		grpc.ChainStreamInterceptor(grpclock.StreamServerInterceptor(db, grpclock.MetadataKey(ordersNS, "x-order-id"))),
//	)
//
// Each call then runs in its own transaction holding the lock, and the
// handler finds the transaction with middleware.TxFromContext:
//
//	func (s *orders) Pay(ctx context.Context, req *pb.PayRequest) (*pb.PayResponse, error) {
//		tx, _ := middleware.TxFromContext(ctx)
//		if _, err := tx.ExecContext(ctx, "UPDATE orders SET paid = true WHERE id = $1", req.OrderId); err != nil {
//			return nil, status.Error(codes.Internal, "could not pay") // rolls back
//		}
//		return &pb.PayResponse{}, nil // commits before the response is sent
//	}
//
// To apply the lock to some methods only, choose in the key function, or
// use a selector interceptor.
//
// A handler must not commit or roll back the transaction, must not keep
// it beyond its return, and should not start long work while holding the
// lock: every other call for the resource is refused, or waits, meanwhile.
//
// # Status codes
//
// Errors become status codes here, at the edge. Messages are short and
// carry neither SQL nor a driver's message:
//
//	lock busy (advisory.ErrNotAcquired)       codes.Aborted
//	Wait ran out (advisory.ErrLockTimeout)    codes.Aborted
//	key error                                 codes.InvalidArgument (or the key error's own status)
//	database unavailable                      codes.Unavailable
//	the call's context ended                  codes.Canceled or codes.DeadlineExceeded
//	commit failed, or anything else           codes.Internal
//
// A wait that runs out is reported as Aborted, like a refused try, because
// the resource was busy and the client should retry the whole call;
// DeadlineExceeded is kept for the client's own deadline. The handler's
// own error is returned unchanged, after the rollback.
//
// # Commit and the response
//
// A unary call's transaction commits after the handler returns and before
// the response is sent: if the commit fails, the client gets
// codes.Internal, never the handler's response. A stream's messages go
// out as the handler sends them, so only its final status tells the client
// whether the work was committed.
package grpclock
