package advisory

import (
	"context"
	"database/sql"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// Lock waits until it holds an exclusive session lock on key. The lock is
// held until [Unlock], [UnlockAll], or the end of the session. Locks stack:
// locking a key twice takes two unlocks.
//
// If ctx ends the wait, Lock returns an error wrapping ctx.Err() and closes
// the session, since the lock may have been granted as the wait ended.
func Lock(ctx context.Context, conn *sql.Conn, key Key) error {
	_, err := acquire(ctx, conn, "lock", []Key{key}, sqltext.Lock(false, false, key.sql()))
	return err
}

// LockShared waits until it holds a shared session lock on key. Shared
// locks on a key coexist with each other and exclude exclusive ones. The
// lock is held until [UnlockShared], [UnlockAll], or the end of the
// session. On error it behaves as [Lock] does.
func LockShared(ctx context.Context, conn *sql.Conn, key Key) error {
	_, err := acquire(ctx, conn, "lock shared", []Key{key}, sqltext.Lock(false, true, key.sql()))
	return err
}

// TryLock takes an exclusive session lock on key if it is free, without
// waiting, and reports whether it did. A lock taken is held until
// [Unlock], [UnlockAll], or the end of the session. On error TryLock
// reports false and closes the session, as [Lock] does.
func TryLock(ctx context.Context, conn *sql.Conn, key Key) (bool, error) {
	return acquire(ctx, conn, "try lock", []Key{key}, sqltext.TryLock(false, false, key.sql()))
}

// TryLockShared takes a shared session lock on key if no exclusive lock
// holds it, without waiting, and reports whether it did. A lock taken is
// held until [UnlockShared], [UnlockAll], or the end of the session. On
// error it reports false and closes the session, as [Lock] does.
func TryLockShared(ctx context.Context, conn *sql.Conn, key Key) (bool, error) {
	return acquire(ctx, conn, "try lock shared", []Key{key}, sqltext.TryLock(false, true, key.sql()))
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
	keys = canonical(keys)
	_, err := acquire(ctx, conn, "lock", keys, sqltext.Lock(false, false, sqlKeys(keys)...))
	return err
}

// Unlock releases one exclusive session lock on key. It returns an error
// matching [ErrNotHeld] when the session did not hold it.
//
// Unlock runs even when ctx is already cancelled: it keeps ctx's values but
// not its cancellation, and gives up after ten seconds. If the release
// fails, or the key was not held, the session is closed, so that no lock
// the caller has lost track of stays behind in the pool.
func Unlock(ctx context.Context, conn *sql.Conn, key Key) error {
	return release(ctx, conn, "unlock", []Key{key}, sqltext.Unlock(false, key.sql()))
}

// UnlockShared releases one shared session lock on key, as [Unlock] does
// for an exclusive one.
func UnlockShared(ctx context.Context, conn *sql.Conn, key Key) error {
	return release(ctx, conn, "unlock shared", []Key{key}, sqltext.Unlock(true, key.sql()))
}

// UnlockKeys releases one exclusive session lock on every key, duplicates
// removed, as [Unlock] does for one. It undoes [LockKeys].
func UnlockKeys(ctx context.Context, conn *sql.Conn, keys ...Key) error {
	if len(keys) == 0 {
		return errNoKeys
	}
	keys = canonical(keys)
	return release(ctx, conn, "unlock", keys, sqltext.Unlock(false, sqlKeys(keys)...))
}

// UnlockAll releases every session lock the session holds, exclusive and
// shared, however often each was taken. Transaction locks are not
// affected. Like [Unlock], it runs even when ctx is cancelled, and closes
// the session if it fails.
func UnlockAll(ctx context.Context, conn *sql.Conn) error {
	if conn == nil {
		return errNilConn
	}
	rctx, cancel := releaseContext(ctx)
	defer cancel()
	if _, err := run(rctx, conn, sqltext.UnlockAll); err != nil {
		discard(conn)
		return fail(rctx, "unlock all", "", err)
	}
	return nil
}

// acquire runs a session lock statement on conn and reports whether it
// affected a row, which for a try means the lock was taken. On error it
// closes the session, whose holding is then in doubt.
func acquire(ctx context.Context, conn *sql.Conn, op string, keys []Key, stmt string) (bool, error) {
	if conn == nil {
		return false, errNilConn
	}
	n, err := run(ctx, conn, stmt)
	if err != nil {
		discard(conn)
		return false, failWait(ctx, op, keyList(keys), err)
	}
	return n > 0, nil
}

// release runs an unlock statement for keys on a context that survives the
// caller's cancellation. Unless it released every key, it closes the
// session.
func release(ctx context.Context, conn *sql.Conn, op string, keys []Key, stmt string) error {
	if conn == nil {
		return errNilConn
	}
	rctx, cancel := releaseContext(ctx)
	defer cancel()
	n, err := run(rctx, conn, stmt)
	switch {
	case err != nil:
		discard(conn)
		return fail(rctx, op, keyList(keys), err)
	case n != int64(len(keys)):
		discard(conn)
		return failKind(op, keyList(keys), ErrNotHeld, nil)
	}
	return nil
}
