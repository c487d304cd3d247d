package advisory

import (
	"context"
	"database/sql"

	"github.com/pgadvisory/pgadvisory/internal/scope"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// Lock waits until it holds an exclusive session lock on key. The lock is
// held until [Unlock], [UnlockAll], or the end of the session. Locks stack:
// locking a key twice takes two unlocks.
//
// A free key costs one statement. A busy key is waited for in slices of
// about a second, each a statement of its own, so that the wait holds no
// snapshot for longer and holds back neither VACUUM nor CREATE INDEX
// CONCURRENTLY (see docs/waiting.md). The session's lock_timeout and
// statement_timeout bound the whole wait, as they would bound one
// statement: it then fails with [ErrLockTimeout], holding nothing, and the
// session stays open.
//
// If ctx ends the wait, Lock returns an error wrapping ctx.Err() and closes
// the session, since the lock may have been granted as the wait ended. On
// a server that stops answering, it returns within ctx's deadline plus
// [AbortMargin], and the session is closed.
func Lock(ctx context.Context, conn *sql.Conn, key Key) error {
	return wait(ctx, conn, "lock", []sqltext.Key{key.sql()}, false)
}

// LockShared waits until it holds a shared session lock on key. Shared
// locks on a key coexist with each other and exclude exclusive ones. The
// lock is held until [UnlockShared], [UnlockAll], or the end of the
// session. On error it behaves as [Lock] does.
func LockShared(ctx context.Context, conn *sql.Conn, key Key) error {
	return wait(ctx, conn, "lock shared", []sqltext.Key{key.sql()}, true)
}

// TryLock takes an exclusive session lock on key if it is free, without
// waiting, and reports whether it did. A lock taken is held until
// [Unlock], [UnlockAll], or the end of the session. On error TryLock
// reports false and closes the session, as [Lock] does, and on a server
// that stops answering it returns within ctx's deadline plus
// [AbortMargin].
func TryLock(ctx context.Context, conn *sql.Conn, key Key) (bool, error) {
	return acquire(ctx, conn, "try lock", []sqltext.Key{key.sql()}, sqltext.TryLockStmt(scope.ConnForm(conn), scope.ConnGuard(ctx, conn), false, false, key.sql()))
}

// TryLockShared takes a shared session lock on key if no exclusive lock
// holds it, without waiting, and reports whether it did. A lock taken is
// held until [UnlockShared], [UnlockAll], or the end of the session. On
// error it reports false and closes the session, as [Lock] does.
func TryLockShared(ctx context.Context, conn *sql.Conn, key Key) (bool, error) {
	return acquire(ctx, conn, "try lock shared", []sqltext.Key{key.sql()}, sqltext.TryLockStmt(scope.ConnForm(conn), scope.ConnGuard(ctx, conn), false, true, key.sql()))
}

// LockKeys waits until it holds an exclusive session lock on every key. It
// takes them in one statement, in the order of [Key.Compare] with
// duplicates removed, so that callers locking overlapping sets never
// deadlock one another. The locks are held until [UnlockKeys], [UnlockAll],
// or the end of the session.
//
// A statement that fails partway keeps the locks it took, so on any error
// LockKeys closes the session, releasing them all.
func LockKeys(ctx context.Context, conn *sql.Conn, keys ...Key) error {
	if len(keys) == 0 {
		return errNoKeys
	}
	return wait(ctx, conn, "lock", sqltext.KeysOf(canonical(keys)), false)
}

// Unlock releases one exclusive session lock on key. It returns an error
// matching [ErrNotHeld] when the session did not hold it.
//
// Unlock runs even when ctx is already cancelled: it keeps ctx's values but
// not its cancellation, and gives up after ten seconds. Under a ctx that
// can never end, such as context.Background(), it runs under ctx itself,
// bounded only as the caller's other statements under ctx are. If the release
// fails, or the key was not held, the session is closed, so that no lock
// the caller has lost track of stays behind in the pool.
func Unlock(ctx context.Context, conn *sql.Conn, key Key) error {
	return release(ctx, conn, "unlock", []sqltext.Key{key.sql()}, sqltext.UnlockStmt(scope.ConnForm(conn), false, key.sql()))
}

// UnlockShared releases one shared session lock on key, as [Unlock] does
// for an exclusive one.
func UnlockShared(ctx context.Context, conn *sql.Conn, key Key) error {
	return release(ctx, conn, "unlock shared", []sqltext.Key{key.sql()}, sqltext.UnlockStmt(scope.ConnForm(conn), true, key.sql()))
}

// UnlockKeys releases one exclusive session lock on every key, duplicates
// removed, as [Unlock] does for one. It undoes [LockKeys].
func UnlockKeys(ctx context.Context, conn *sql.Conn, keys ...Key) error {
	if len(keys) == 0 {
		return errNoKeys
	}
	sk := sqltext.KeysOf(canonical(keys))
	return release(ctx, conn, "unlock", sk, sqltext.Plain(sqltext.Unlock(false, sk...)))
}

// UnlockAll releases every session lock the session holds, exclusive and
// shared, however often each was taken. Transaction locks are not
// affected. Like [Unlock], it runs even when ctx is cancelled, and closes
// the session if it fails.
func UnlockAll(ctx context.Context, conn *sql.Conn) error {
	if conn == nil {
		return errNilConn
	}
	return scope.UnlockAll(ctx, scope.SQLConn(conn))
}

// acquire takes keys on conn; see [scope.Acquire].
func acquire(ctx context.Context, conn *sql.Conn, op string, keys []sqltext.Key, stmt sqltext.Stmt) (bool, error) {
	return scope.Acquire(ctx, scope.SQLConn(conn), op, keys, stmt)
}

// wait waits for session locks on keys on conn, in slices; see
// [scope.Take].
func wait(ctx context.Context, conn *sql.Conn, op string, keys []sqltext.Key, shared bool) error {
	o := scope.Options{Shared: shared}
	_, err := scope.Take(ctx, scope.DefaultHooks(), scope.SQLConn(conn), op, keys, &o, scope.ConnForm(conn))
	return err
}

// release releases keys on conn; see [scope.Release].
func release(ctx context.Context, conn *sql.Conn, op string, keys []sqltext.Key, stmt sqltext.Stmt) error {
	return scope.Release(ctx, scope.SQLConn(conn), op, keys, stmt)
}
