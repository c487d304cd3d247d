package httplock

import (
	"context"
	"database/sql"
	"errors"
	"net/http"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/internal/reqlock"
)

// XactLock returns middleware that runs each request in a transaction
// holding a transaction-level advisory lock on the key that key finds in
// the request. Per request it:
//
//  1. computes the key; an error is answered with 400 Bad Request before
//     any transaction begins, and [ErrNoLock] serves the request at once
//     without a transaction;
//  2. begins a transaction on db and takes the lock, without waiting
//     unless [Wait] says so; a busy lock is answered with 409 Conflict and
//     a Retry-After header, and the handler is not called;
//  3. calls the handler with the transaction in the request's context,
//     where [advisory.TxFromContext] finds it, unless the request's context has
//     ended by then;
//  4. ends the transaction before the first byte of the response leaves:
//     on the handler's first WriteHeader, Write, Flush or Hijack it commits
//     if the status is below 400 and rolls back otherwise ([CommitPolicy]
//     changes the rule). If that commit fails, or the request's context
//     has ended by then, the transaction rolls back and the client gets
//     500 Internal Server Error instead of the handler's response (499 if
//     the client went away, 503 Service Unavailable if the request's
//     deadline passed). A handler that writes nothing is committed when it
//     returns.
//
// The lock is released when the transaction ends, so it is held while the
// handler works and never after its response has begun. A handler that
// panics has its transaction rolled back, and the panic continues,
// http.ErrAbortHandler included.
//
// Each request holds one of db's connections from the begin to the end of
// its transaction, so db's pool must allow as many connections as there
// may be locked requests at once, plus what the rest of the program uses.
//
// The ResponseWriter the handler gets keeps Flush, Hijack and what
// http.ResponseController offers (deadlines, full duplex) through its
// Unwrap method.
//
// XactLock is built on advisory.WithXactLock. It panics if db or key is nil.
func XactLock(db *sql.DB, key KeyFunc, opts ...Option) func(http.Handler) http.Handler {
	switch {
	case db == nil:
		panic("httplock: XactLock: nil *sql.DB")
	case key == nil:
		panic("httplock: XactLock: nil KeyFunc")
	}
	o := newOptions(opts)
	lockOpts := o.LockOptions()
	return func(next http.Handler) http.Handler {
		if next == nil {
			panic("httplock: XactLock: nil http.Handler")
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			k, err := key(r)
			switch {
			case errors.Is(err, reqlock.ErrNoLock):
				next.ServeHTTP(w, r.WithContext(advisory.NewTxContext(r.Context(), nil)))
				return
			case err != nil:
				o.fail(w, r, keyError(err))
				return
			}
			called, err := reqlock.Run(r.Context(), db, k, lockOpts, func(ctx context.Context, tx *sql.Tx) error {
				rw := newResponseWriter(ctx, w, r, tx, o)
				next.ServeHTTP(rw, r.WithContext(ctx))
				if rw.state == pending {
					rw.end(http.StatusOK)
				}
				return nil
			})
			if !called {
				o.fail(w, r, classify(r.Context(), err))
			}
			// Otherwise the response went out with the transaction's
			// outcome; WithXactLock only found the transaction ended.
		})
	}
}
