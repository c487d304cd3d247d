package pgxlock

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/scope"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// XactLock waits until it holds an exclusive transaction lock on key. The
// lock is released when tx commits or rolls back. Taking it again in the
// same transaction succeeds at once.
//
// A free key costs one statement. A busy key is waited for in slices,
// each under a savepoint of tx's, as [advisory.XactLock] does: a slice
// that runs out leaves tx as it was.
//
// If ctx ends the wait, XactLock returns an error wrapping ctx.Err(). After
// any error from the transaction lock functions, roll tx back: the lock,
// if it was granted as the error arose, ends with the transaction, and so
// do the locks tx took before. (pgx has by then closed the connection if
// ctx ended: the server ends the transaction, and tx's Rollback returns
// at once.)
func XactLock(ctx context.Context, tx pgx.Tx, key advisory.Key) error {
	return xactWait(ctx, tx, "xact lock", key, false)
}

// XactLockShared waits until it holds a shared transaction lock on key.
// Shared locks on a key coexist with each other and exclude exclusive
// ones. The lock is released when tx commits or rolls back. On error it
// behaves as [XactLock] does.
func XactLockShared(ctx context.Context, tx pgx.Tx, key advisory.Key) error {
	return xactWait(ctx, tx, "xact lock shared", key, true)
}

// TryXactLock takes an exclusive transaction lock on key if it is free,
// without waiting, and reports whether it did, in one round trip. A lock
// taken is released when tx commits or rolls back.
func TryXactLock(ctx context.Context, tx pgx.Tx, key advisory.Key) (bool, error) {
	return xactTry(ctx, tx, "try xact lock", key, false)
}

// TryXactLockShared takes a shared transaction lock on key if no
// exclusive lock holds it, without waiting, and reports whether it did. A
// lock taken is released when tx commits or rolls back.
func TryXactLockShared(ctx context.Context, tx pgx.Tx, key advisory.Key) (bool, error) {
	return xactTry(ctx, tx, "try xact lock shared", key, true)
}

// xactTry takes key in tx without waiting; see [scope.XactAcquire].
func xactTry(ctx context.Context, tx pgx.Tx, op string, key advisory.Key, shared bool) (bool, error) {
	t := transaction(tx)
	if t == nil {
		return false, errNilTx
	}
	k := sqltext.KeyOf(key)
	return scope.XactAcquire(ctx, t, op, []sqltext.Key{k}, sqltext.TryLockStmt(sqltext.Params, scope.TxGuard(ctx), true, shared, k))
}

// xactWait waits for key in tx, in slices, each under a savepoint; see
// [scope.XactTake].
func xactWait(ctx context.Context, tx pgx.Tx, op string, key advisory.Key, shared bool) error {
	t := transaction(tx)
	if t == nil {
		return errNilTx
	}
	o := scope.Options{Shared: shared}
	_, err := scope.XactTake(ctx, scope.DefaultHooks(), t, false, op, []sqltext.Key{sqltext.KeyOf(key)}, &o, sqltext.Params)
	return err
}
