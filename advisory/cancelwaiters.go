package advisory

import (
	"context"
	"database/sql"
	"fmt"
	"math"

	"github.com/pgadvisory/pgadvisory/internal/scope"
)

// CancelWaiters wakes the sessions that wait for one of the n consecutive
// keys from first, as many as the keys have free: it cancels the current
// statement of those that have waited longest, and returns how many it
// signalled. It is for waiters that try every key again when woken, as
// callers of [LockAnyWithin] do, after a holder of one of the keys
// released it: a waiter for the very key released needs no wake, since
// the server grants the key to its first waiter as it frees it. It takes
// no lock, and costs one round trip on conn, which reads pg_locks and
// pg_stat_activity once.
//
// The n keys are first, first+1, ..., first+n-1 for a bigint key, and for
// a pair (a, b) the pairs (a, b), (a, b+1), ..., the second integer
// wrapping around within int32. A waiter is a session of the same
// database whose statement waits for one of the keys (wait event
// Lock/advisory), and that conn's role may signal: one of a role whose
// privileges it has, and a superuser's only when it is one. A cancelled
// statement fails with SQLSTATE 57014: [LockAnyWithin] then returns an
// error matching [ErrLockTimeout] and keeps its session, and [Lock] fails
// with ErrLockTimeout, so wake only waiters that expect it.
//
// n must be at least 1, and first+n-1 must not pass the largest bigint;
// otherwise CancelWaiters sends nothing and returns an error matching
// [ErrBadKey]. On any error from the server it closes the session, so that
// a cancel of the driver's, still in flight, lands on no later statement.
func CancelWaiters(ctx context.Context, conn *sql.Conn, first Key, n int) (int, error) {
	if conn == nil {
		return 0, errNilConn
	}
	v, isInt := first.Int64()
	switch {
	case n < 1 || n > math.MaxInt32:
		return 0, fmt.Errorf("%w: cancel waiters %s: %d keys: want 1 to %d", ErrBadKey, first, n, math.MaxInt32)
	case isInt && v > math.MaxInt64-int64(n-1):
		return 0, fmt.Errorf("%w: cancel waiters %s: its %d keys would pass the largest bigint", ErrBadKey, first, n)
	}
	woken, err := scope.CancelWaiters(ctx, conn, first.sql(), n)
	return int(woken), err
}
