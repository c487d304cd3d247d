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
// If ctx ends the wait, XactLock returns an error wrapping ctx.Err(). After
// any error from the transaction lock functions, roll tx back: the lock,
// if it was granted as the error arose, ends with the transaction.
func XactLock(ctx context.Context, tx *sql.Tx, key Key) error {
	_, err := xactAcquire(ctx, tx, "xact lock", []sqltext.Key{key.sql()}, sqltext.LockStmt(scope.TxForm(tx), true, false, key.sql()))
	return err
}

// XactLockShared waits until it holds a shared transaction lock on key.
// Shared locks on a key coexist with each other and exclude exclusive ones.
// The lock is released when tx commits or rolls back.
func XactLockShared(ctx context.Context, tx *sql.Tx, key Key) error {
	_, err := xactAcquire(ctx, tx, "xact lock shared", []sqltext.Key{key.sql()}, sqltext.LockStmt(scope.TxForm(tx), true, true, key.sql()))
	return err
}

// TryXactLock takes an exclusive transaction lock on key if it is free,
// without waiting, and reports whether it did. A lock taken is released
// when tx commits or rolls back.
func TryXactLock(ctx context.Context, tx *sql.Tx, key Key) (bool, error) {
	return xactAcquire(ctx, tx, "try xact lock", []sqltext.Key{key.sql()}, sqltext.TryLockStmt(scope.TxForm(tx), true, false, key.sql()))
}

// TryXactLockShared takes a shared transaction lock on key if no exclusive
// lock holds it, without waiting, and reports whether it did. A lock taken
// is released when tx commits or rolls back.
func TryXactLockShared(ctx context.Context, tx *sql.Tx, key Key) (bool, error) {
	return xactAcquire(ctx, tx, "try xact lock shared", []sqltext.Key{key.sql()}, sqltext.TryLockStmt(scope.TxForm(tx), true, true, key.sql()))
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
	sk := sqltext.KeysOf(canonical(keys))
	_, err := xactAcquire(ctx, tx, "xact lock", sk, sqltext.Plain(sqltext.Lock(true, false, sk...)))
	return err
}

// xactAcquire takes keys in tx; see [scope.XactAcquire].
func xactAcquire(ctx context.Context, tx *sql.Tx, op string, keys []sqltext.Key, stmt sqltext.Stmt) (bool, error) {
	return scope.XactAcquire(ctx, tx, op, keys, stmt)
}
