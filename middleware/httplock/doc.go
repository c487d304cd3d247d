// Package httplock provides net/http middleware that coordinates
// concurrent requests for the same resource with a PostgreSQL
// transaction-level advisory lock, derived from the request's route
// parameters.
//
// # Use
//
// Wrap the routes that change a resource, after the router has matched
// them, so that their path parameters are set:
//
//	lock := httplock.XactLock(db, httplock.PathKey(ordersNS, "id"))
//	mux := http.NewServeMux()
//	mux.Handle("POST /orders/{id}/pay", lock(http.HandlerFunc(pay)))
//
// Each request then runs in its own transaction holding the lock on
// [advisory.PairKey](ordersNS, id). The handler finds the transaction with
// [advisory.TxFromContext] and does its work in it:
//
//	func pay(w http.ResponseWriter, r *http.Request) {
//		tx, _ := advisory.TxFromContext(r.Context())
//		if _, err := tx.ExecContext(r.Context(), "UPDATE orders SET paid = true WHERE id = $1", r.PathValue("id")); err != nil {
//			http.Error(w, "could not pay", http.StatusInternalServerError) // rolls back
//			return
//		}
//		w.WriteHeader(http.StatusNoContent) // commits, then sends 204
//	}
//
// A second request for the same order, while the first holds the lock, is
// answered 409 Conflict with Retry-After, without calling the handler;
// [Wait] makes it wait instead.
//
// # Keys
//
// The key functions follow one vocabulary, shared with package grpclock:
// a name ending in Key reads an int32 id and gives [advisory.PairKey](ns,
// id), one ending in Int64Key reads an int64 id and gives
// [advisory.Int64Key](id), and one ending in NameKey hashes a name and
// gives [advisory.NameKey](ns, name).
//
// [PathKey], [PathInt64Key] and [PathNameKey] read the route with
// r.PathValue, which Go's ServeMux and chi v5 (as of the v5.5.0 this
// module requires) fill in. Routers that keep route variables elsewhere
// get the same checks from [ValueKey], [ValueInt64Key] and [ValueNameKey],
// which take a func that returns the value; for gorilla/mux:
//
//	key := httplock.ValueKey(ordersNS, func(r *http.Request) string { return mux.Vars(r)["id"] })
//
// The values must follow these rules, the same in both transports;
// anything else is an error matching [ErrBadKey], answered 400 Bad
// Request:
//
//   - an id is a nonzero integer in the range of its key (int32 or int64),
//     written in canonical decimal as strconv.FormatInt writes it: "42"
//     and "-7", never "+42", "042" or "-0", so that one resource has one
//     spelling and so one lock;
//   - a name is any non-empty string of bytes; several names are joined
//     with [JoinName] before they are hashed.
//
// Any func(*http.Request) (advisory.Key, error) is a [KeyFunc]. A key
// function must not read the request body: the lock comes from the route
// alone. One that returns [ErrNoLock] has the request served without a
// transaction or a lock.
//
// # Commit before the response
//
// The transaction ends before the first byte of the response is written.
// On the handler's first WriteHeader, Write, Flush or Hijack, a status
// below 400 commits and a status of 400 or more rolls back ([CommitPolicy]
// replaces the rule). If the commit fails, the client gets 500 Internal
// Server Error instead of the handler's response (499 if the client went
// away, 503 if the request's deadline passed, and nothing is committed
// then), and the handler's later writes are dropped. So a client that
// sees a success knows that the work is durable, and the next request for
// the resource, which may arrive the moment the response does, finds the
// lock free and the work visible.
//
// It follows that a handler must do all its database work before it writes
// anything: after the first write, the transaction is over.
//
// # What a handler may do with the transaction
//
// A handler may run any statement in the transaction, and pass it to
// functions it calls, as long as it returns. It must not commit or roll it
// back itself, must not keep it, or hand it to a goroutine, beyond its own
// return, and should not start long work while holding the lock: every
// other request for the resource is refused, or waits, until the response
// begins.
//
// # Connections
//
// Each request that holds a lock holds one pooled connection of the
// *sql.DB, from its BEGIN until its response begins. Size the pool
// (sql.DB.SetMaxOpenConns) for the locked requests that may run at once,
// plus the rest of the program's use: when the pool is exhausted, further
// requests wait for a connection before they can even try their lock.
//
// # Failures
//
// The middleware answers its own failures with short plain-text bodies
// that never contain SQL or a driver's message:
//
//	KeyFunc error              ErrBadKey                 400 Bad Request, no transaction begun
//	lock busy                  advisory.ErrNotAcquired   409 Conflict, Retry-After: 1
//	wait ended by the server   advisory.ErrLockTimeout   409 Conflict, Retry-After: 1
//	request deadline passed    context.DeadlineExceeded  503 Service Unavailable
//	client went away           context.Canceled          499, no body; the handler is not called
//	database unavailable       ErrUnavailable            503 Service Unavailable
//	commit failed              ErrCommit                 500 Internal Server Error
//	anything else                                        500 Internal Server Error
//
// A wait that the server ended, because [Wait] ran out or because a
// statement_timeout shorter than Wait cancelled it, is answered as a busy
// lock, because that is what it is: the client should retry later, as it
// would after a refused try. A request whose context is cancelled, which
// for a server request means that the client closed the connection, has
// no one to answer; the middleware sends 499 (see
// [StatusClientClosedRequest]) only so that net/http does not send an
// implicit 200. Once the request's context has ended, nothing is
// committed: the handler's first write rolls back instead, and the error
// handler gets an error matching both [ErrCommit] and the context's
// error. [ErrorResponse] and [RetryAfter] change the
// answers; [ErrorHandler] replaces them, and is also the place to log the
// error. [ErrUnavailable] says which errors count as an unavailable
// database.
//
// # Panics
//
// A handler that panics before writing has its transaction rolled back,
// and the panic continues to the server, which drops the connection. A
// panic after the first write cannot undo a commit that already happened.
//
// # Idempotency
//
// [Idempotent], beside XactLock, runs a request that carries an
// Idempotency-Key header at most once: a repeated request gets the first
// one's recorded status, headers and body, marked with [ReplayedHeader];
// a duplicate that arrives while the first runs gets 409 Conflict with
// Retry-After; a key reused for another method or path gets 422
// Unprocessable Entity ([ErrMismatch]). It covers POST, PUT, PATCH and
// DELETE ([IdempotentMethods]) and serves requests without the header
// unchanged ([RequireIdempotencyKey] refuses them). It buffers responses
// of up to 1 MiB ([MaxResponseBytes]) until the commit, and keeps its
// records in package idempotency's table until idempotency.Purge deletes
// them. It takes every [Option] that XactLock takes, and options of its
// own, which are [IdempotentOption]s: XactLock does not compile with them.
//
//	mux.Handle("POST /payments", httplock.Idempotent(db)(http.HandlerFunc(pay)))
//
// # Dependencies
//
// The package depends on the standard library,
// github.com/pgadvisory/pgadvisory/advisory and
// github.com/pgadvisory/pgadvisory/advisory/idempotency only: the one
// internal package of this module that it imports, which holds what it
// shares with grpclock, imports nothing else either.
package httplock
