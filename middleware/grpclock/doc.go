// Package grpclock provides gRPC server interceptors that coordinate
// concurrent calls for the same resource with a PostgreSQL
// transaction-level advisory lock, derived from the request message or
// the call's metadata. It is the gRPC counterpart of package httplock,
// whose key functions it names alike, and the only package of this module
// that imports google.golang.org/grpc. It does not import httplock.
//
// # Use
//
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(grpclock.UnaryServerInterceptor(db, grpclock.FieldKey(ordersNS, "order_id"))),
//		grpc.ChainStreamInterceptor(grpclock.StreamServerInterceptor(db, grpclock.MetadataKey(ordersNS, "x-order-id"))),
//	)
//
// A unary call whose request has order_id 42 and a stream whose metadata
// has x-order-id: 42 take the same lock, [advisory.PairKey](ordersNS, 42),
// and so exclude each other. Each call runs in its own transaction holding
// the lock, and the handler finds the transaction with
// [advisory.TxFromContext]:
//
//	func (s *orders) Pay(ctx context.Context, req *pb.PayRequest) (*pb.PayResponse, error) {
//		tx, _ := advisory.TxFromContext(ctx)
//		if _, err := tx.ExecContext(ctx, "UPDATE orders SET paid = true WHERE id = $1", req.OrderId); err != nil {
//			return nil, status.Error(codes.Internal, "could not pay") // rolls back
//		}
//		return &pb.PayResponse{}, nil // commits before the response is sent
//	}
//
// To apply the lock to some methods only, return [ErrNoLock] from the key
// function for the others: they are served at once, without a
// transaction, and advisory.TxFromContext reports false in them. A
// selector interceptor works too.
//
// A handler must not commit or roll back the transaction, must not keep
// it beyond its return, and should not start long work while holding the
// lock: every other call for the resource is refused, or waits, meanwhile.
//
// # Keys
//
// The key functions follow one vocabulary, shared with package httplock:
// a name ending in Key reads an int32 id and gives [advisory.PairKey](ns,
// id), one ending in Int64Key reads an int64 id and gives
// [advisory.Int64Key](id), and one ending in NameKey hashes a name and
// gives [advisory.NameKey](ns, name).
//
// Unary calls are keyed on a field of their request: [FieldKey] and
// [FieldInt64Key] read an integer field, [FieldNameKey] a string or bytes
// field. Streams, whose messages have not been read when the lock is
// taken, are keyed on their metadata: [MetadataKey], [MetadataInt64Key]
// and [MetadataNameKey] read one entry. The same id or name gives the same
// key in a field and in metadata, so that unary calls and streams on one
// resource exclude each other.
//
// The values must follow these rules, the same in both transports;
// anything else is an error matching [ErrBadKey], and the call fails with
// codes.InvalidArgument:
//
//   - an id is a nonzero integer in the range of its key (int32 or int64).
//     Zero is never an id, because an unset proto3 field reads as 0. In
//     metadata it is written in canonical decimal as strconv.FormatInt
//     writes it: "42" and "-7", never "+42", "042" or "-0", so that one
//     resource has one spelling and so one lock;
//   - a name is any non-empty string of bytes; a metadata entry must have
//     exactly one value.
//
// A NameKey hashes: for "42" it gives PairKey(ns, hashtext('42')), not
// PairKey(ns, 42). Keep a namespace to ids or to names, never both.
//
// # Streams hold their lock for their whole life
//
// A stream's transaction begins before its handler runs and ends when the
// handler returns. For all that time the stream holds the transaction, one
// pooled connection of the *sql.DB, and the lock: every other call for the
// resource is refused, or waits, and the pool has one connection less. That
// suits short server-streaming calls. For long-lived or bidirectional
// streams, take the lock per message instead: leave the stream without a
// lock ([ErrNoLock] from its key function, or no interceptor) and
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
//	wait ended by the server                  codes.Aborted, with errdetails.RetryInfo
//	  (advisory.ErrLockTimeout)
//	key error                                 codes.InvalidArgument (or the key error's own status)
//	key function that does not fit the call   codes.Internal
//	database unavailable                      codes.Unavailable
//	the call's context ended                  codes.Canceled or codes.DeadlineExceeded
//	commit failed, or anything else           codes.Internal
//
// A wait that the server ended, because [Wait] ran out or because a
// statement_timeout shorter than Wait cancelled it, is reported as
// Aborted, like a refused try, because the resource was busy and the
// client should retry the whole call;
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
