package middleware

import (
	"context"
	"database/sql"
)

// txKey is the context key of the request's transaction.
type txKey struct{}

// NewContext returns a copy of ctx that carries tx, for [TxFromContext] to
// find. [XactLock] and the grpclock interceptors use it; tests use it to hand
// a handler a transaction of their own.
func NewContext(ctx context.Context, tx *sql.Tx) context.Context {
	return context.WithValue(ctx, txKey{}, tx)
}

// TxFromContext returns the transaction that [XactLock] (or [NewContext])
// put in ctx, and whether there was one. The transaction holds the
// request's lock; it is committed or rolled back by the middleware, never
// by the handler, and is over once the handler has written its response.
func TxFromContext(ctx context.Context) (*sql.Tx, bool) {
	tx, ok := ctx.Value(txKey{}).(*sql.Tx)
	return tx, ok && tx != nil
}
