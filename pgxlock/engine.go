package pgxlock

import (
	"context"
	"runtime"
	"sync"
	"weak"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pgadvisory/pgadvisory/internal/scope"
)

// engines holds the engine of each server session a lock call has
// identified, keyed by a weak pointer to its *pgconn.PgConn: one PgConn
// is one server session for its whole life, whether it is reached through
// a *pgx.Conn, a *pgxpool.Conn or a pgx.Tx. The weak keys keep no
// connection alive, and a cleanup deletes an entry once its PgConn is
// collected; a PgConn allocated later at the same address gets a weak
// pointer of its own, so it never inherits an entry. Reads take no lock
// of the map's own.
var engines sync.Map // weak.Pointer[pgconn.PgConn] → *scope.Engine

// engineOf returns the engine behind pc, identifying it first through q,
// a session or transaction on pc, with one round trip (two on Citus) the
// first time pc is asked. A probe that fails is not remembered.
func engineOf(ctx context.Context, pc *pgconn.PgConn, q scope.Querier) (*scope.Engine, error) {
	k := weak.Make(pc)
	if e, ok := engines.Load(k); ok {
		return e.(*scope.Engine), nil
	}
	e, err := scope.IdentifyEngine(ctx, q)
	if err != nil {
		return nil, err
	}
	got, loaded := engines.LoadOrStore(k, &e)
	if !loaded {
		runtime.AddCleanup(pc, forgetEngine, k)
	}
	return got.(*scope.Engine), nil
}

// forgetEngine deletes the entry of a collected PgConn.
func forgetEngine(k weak.Pointer[pgconn.PgConn]) { engines.Delete(k) }
