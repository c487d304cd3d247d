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
//		grpc.ChainStreamInterceptor(grpclock.StreamServerInterceptor(db, grpclock.MetadataIDKey(ordersNS, "x-order-id"))),
//	)
//
// A unary call whose request has order_id 42 and a stream whose metadata
// has x-order-id: 42 take the same lock, advisory.PairKey(ordersNS, 42),
// and so exclude each other. Each call runs in its own transaction holding
// the lock, and the handler finds the transaction with
// advisory.TxFromContext:
//
//	func (s *orders) Pay(ctx context.Context, req *pb.PayRequest) (*pb.PayResponse, error) {
//		tx, _ := advisory.TxFromContext(ctx)
//		if _, err := tx.ExecContext(ctx, "UPDATE orders SET paid = true WHERE id = $1", req.OrderId); err != nil {
//			return nil, status.Error(codes.Internal, "could not pay") // rolls back
//		}
//		return &pb.PayResponse{}, nil // commits before the response is sent
//	}
//
// To apply the lock to some methods only, return httplock.ErrNoLock from
// the key function for the others: they are served at once, without a
// transaction, and advisory.TxFromContext reports false in them. A
// selector interceptor works too.
//
// A handler must not commit or roll back the transaction, must not keep
// it beyond its return, and should not start long work while holding the
// lock: every other call for the resource is refused, or waits, meanwhile.
//
// # Keys
//
// [FieldKey] reads an integer or string field of the request, and
// [FieldInt64Key] an integer field as a bigint key. [MetadataIDKey] and
// [MetadataInt64Key] read an integer id from the metadata, giving the keys
// FieldKey and FieldInt64Key give the same id. [MetadataKey] hashes a
// metadata value as advisory.NameKey does: keep it to namespaces of
// names, never one of integer ids, whose keys it would never match.
//
// # Streams hold their lock for their whole life
//
// A stream's transaction begins before its handler runs and ends when the
// handler returns. For all that time the stream holds the transaction, one
// pooled connection of the *sql.DB, and the lock: every other call for the
// resource is refused, or waits, and the pool has one connection less. That
// suits short server-streaming calls. For long-lived or bidirectional
// streams, take the lock per message instead: leave the stream without a
// lock (httplock.ErrNoLock from its key function, or no interceptor) and
// call advisory.WithXactLock inside the handler for each message, with the
// key the message names.
//
// Size the pool (sql.DB.SetMaxOpenConns) for the locked calls and streams
// that may run at once.
//
// # Status codes
//
// Errors become status codes here, at the edge. Messages are short and
// carry neither SQL, nor a driver's message, nor Go types or method names:
//
//	lock busy (advisory.ErrNotAcquired)       codes.Aborted, with errdetails.RetryInfo
//	Wait ran out (advisory.ErrLockTimeout)    codes.Aborted, with errdetails.RetryInfo
//	key error                                 codes.InvalidArgument (or the key error's own status)
//	key function that does not fit the call   codes.Internal
//	database unavailable                      codes.Unavailable
//	the call's context ended                  codes.Canceled or codes.DeadlineExceeded
//	commit failed, or anything else           codes.Internal
//
// A wait that runs out is reported as Aborted, like a refused try, because
// the resource was busy and the client should retry the whole call;
// DeadlineExceeded is kept for the client's own deadline. The RetryInfo
// detail suggests a delay, one second unless [RetryAfter] says otherwise.
// The handler's own error is returned unchanged, after the rollback.
//
// The errors the interceptors return carry their cause: status.FromError
// and status.Code give the client's status, while errors.Is and errors.As
// reach the cause, so that an interceptor further out can log it or test
// errors.Is(err, advisory.ErrNotAcquired). The error's text is the
// status's alone; log errors.Unwrap(err) for the cause.
//
// # Commit and the response
//
// A unary call's transaction commits after the handler returns and before
// the response is sent: if the commit fails, the client gets
// codes.Internal, never the handler's response. A call whose context has
// ended by then, because the client cancelled it or its deadline passed,
// is rolled back instead of committed. A stream's messages go
// out as the handler sends them, so only its final status tells the client
// whether the work was committed.
package grpclock
