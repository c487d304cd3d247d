package advisory

import (
	"context"
	"database/sql"

	"github.com/pgadvisory/pgadvisory/internal/scope"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// XactLock waits until it holds an exclusive transaction lock on key. The
// lock is released when tx commits or rolls back. Taking it again in the
// same transaction succeeds at once.
//
// A free key costs one statement. A busy key is waited for in slices of
// about a second, each under a savepoint of tx's, so that no statement
// holds a snapshot for longer (see docs/waiting.md): a slice that runs out
// leaves tx as it was. CREATE INDEX CONCURRENTLY still waits for tx as a
// whole; [WithXactLock], which runs each slice in a transaction of its
// own, does not hold it back. Under REPEATABLE READ, tx's own snapshot
// lives until tx ends.
//
// If ctx ends the wait, XactLock returns an error wrapping ctx.Err(). After
// any error from the transaction lock functions, roll tx back: the lock,
// if it was granted as the error arose, ends with the transaction, and so
// do the locks tx took before, which a failed wait leaves held until
// then. On a server that stops answering, XactLock returns within ctx's
// deadline plus [AbortMargin], and tx's connection is closed: tx fails
// from then on, and its Rollback returns at once.
func XactLock(ctx context.Context, tx *sql.Tx, key Key) error {
	return xactWait(ctx, tx, "xact lock", []sqltext.Key{key.sql()}, false)
}

// XactLockShared waits until it holds a shared transaction lock on key.
// Shared locks on a key coexist with each other and exclude exclusive ones.
// The lock is released when tx commits or rolls back.
func XactLockShared(ctx context.Context, tx *sql.Tx, key Key) error {
	return xactWait(ctx, tx, "xact lock shared", []sqltext.Key{key.sql()}, true)
}

// TryXactLock takes an exclusive transaction lock on key if it is free,
// without waiting, and reports whether it did. A lock taken is released
// when tx commits or rolls back.
func TryXactLock(ctx context.Context, tx *sql.Tx, key Key) (bool, error) {
	return xactAcquire(ctx, tx, "try xact lock", []sqltext.Key{key.sql()}, sqltext.TryLockStmt(scope.TxForm(ctx, tx), scope.TxGuard(ctx), true, false, key.sql()))
}

// TryXactLockShared takes a shared transaction lock on key if no exclusive
// lock holds it, without waiting, and reports whether it did. A lock taken
// is released when tx commits or rolls back.
func TryXactLockShared(ctx context.Context, tx *sql.Tx, key Key) (bool, error) {
	return xactAcquire(ctx, tx, "try xact lock shared", []sqltext.Key{key.sql()}, sqltext.TryLockStmt(scope.TxForm(ctx, tx), scope.TxGuard(ctx), true, true, key.sql()))
}

// XactLockKeys waits until it holds an exclusive transaction lock on every
// key. It takes them in one statement, in the order of [Key.Compare] with
// duplicates removed, so that transactions locking overlapping sets never
// deadlock one another. The locks are released when tx commits or rolls
// back.
func XactLockKeys(ctx context.Context, tx *sql.Tx, keys ...Key) error {
	if len(keys) == 0 {
		return errNoKeys
	}
	return xactWait(ctx, tx, "xact lock", sqltext.KeysOf(canonical(keys)), false)
}

// xactWait waits for transaction locks on keys in tx, in slices, each
// under a savepoint; see [scope.XactTake].
func xactWait(ctx context.Context, tx *sql.Tx, op string, keys []sqltext.Key, shared bool) error {
	o := scope.Options{Shared: shared}
	_, err := scope.XactTake(ctx, scope.DefaultHooks(), scope.SQLTx(tx), false, op, keys, &o, scope.TxForm(ctx, tx))
	return err
}

// xactAcquire takes keys in tx; see [scope.XactAcquire].
func xactAcquire(ctx context.Context, tx *sql.Tx, op string, keys []sqltext.Key, stmt sqltext.Stmt) (bool, error) {
	return scope.XactAcquire(ctx, scope.SQLTx(tx), op, keys, stmt)
}
