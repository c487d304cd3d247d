package pgxlock

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/scope"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// Conn is the constraint of the session lock functions: a *pgx.Conn, or a
// *pgxpool.Conn acquired from a pool. Each is one server session for as
// long as the caller has it, which is what a session lock lives on. A
// *pgxpool.Pool is not a Conn: each of its calls may run on another
// session, so a lock and its unlock could land on two.
//
// A session lock outlives the *pgxpool.Conn's Release: the connection
// goes back to the pool with every lock its session holds. Unlock before
// Release.
type Conn interface {
	*pgx.Conn | *pgxpool.Conn
}

// Lock waits until it holds an exclusive session lock on key. The lock is
// held until [Unlock], [UnlockAll], or the end of the session. Locks
// stack: locking a key twice takes two unlocks.
//
// A free key costs one statement. A busy key is waited for in slices, as
// [advisory.Lock] does; the session's lock_timeout and statement_timeout
// bound the whole wait, which then fails with [advisory.ErrLockTimeout],
// holding nothing, and the session stays open.
//
// If ctx ends the wait, Lock returns an error wrapping ctx.Err() and
// closes the connection, since the lock may have been granted as the wait
// ended: the server ends the session and its locks, and a *pgxpool.Conn's
// Release then destroys the connection rather than pool it.
func Lock[C Conn](ctx context.Context, conn C, key advisory.Key) error {
	return wait(ctx, session(conn), "lock", key, false)
}

// LockShared waits until it holds a shared session lock on key. Shared
// locks on a key coexist with each other and exclude exclusive ones. The
// lock is held until [UnlockShared], [UnlockAll], or the end of the
// session. On error it behaves as [Lock] does.
func LockShared[C Conn](ctx context.Context, conn C, key advisory.Key) error {
	return wait(ctx, session(conn), "lock shared", key, true)
}

// TryLock takes an exclusive session lock on key if it is free, without
// waiting, and reports whether it did, in one round trip. A lock taken is
// held until [Unlock], [UnlockAll], or the end of the session. On error
// TryLock reports false and closes the connection, as [Lock] does.
func TryLock[C Conn](ctx context.Context, conn C, key advisory.Key) (bool, error) {
	return try(ctx, session(conn), "try lock", key, false)
}

// TryLockShared takes a shared session lock on key if no exclusive lock
// holds it, without waiting, and reports whether it did. A lock taken is
// held until [UnlockShared], [UnlockAll], or the end of the session. On
// error it reports false and closes the connection, as [Lock] does.
func TryLockShared[C Conn](ctx context.Context, conn C, key advisory.Key) (bool, error) {
	return try(ctx, session(conn), "try lock shared", key, true)
}

// Unlock releases one exclusive session lock on key. It returns an error
// matching [advisory.ErrNotHeld] when the session did not hold it.
//
// Unlock runs even when ctx is already cancelled: it keeps ctx's values
// but not its cancellation, and gives up after ten seconds. If the release
// fails, or the key was not held, the connection is closed, so that no
// lock the caller has lost track of goes back to the pool.
func Unlock[C Conn](ctx context.Context, conn C, key advisory.Key) error {
	return release(ctx, session(conn), "unlock", key, false)
}

// UnlockShared releases one shared session lock on key, as [Unlock] does
// for an exclusive one.
func UnlockShared[C Conn](ctx context.Context, conn C, key advisory.Key) error {
	return release(ctx, session(conn), "unlock shared", key, true)
}

// UnlockAll releases every session lock the session holds, exclusive and
// shared, however often each was taken. Transaction locks are not
// affected. Like [Unlock], it runs even when ctx is cancelled, and closes
// the connection if it fails.
func UnlockAll[C Conn](ctx context.Context, conn C) error {
	s := session(conn)
	if s == nil {
		return errNilConn
	}
	return scope.UnlockAll(ctx, s)
}

// try takes key on s without waiting; see [scope.Acquire].
func try(ctx context.Context, s scope.Session, op string, key advisory.Key, shared bool) (bool, error) {
	if s == nil {
		return false, errNilConn
	}
	k := sqltext.KeyOf(key)
	return scope.Acquire(ctx, s, op, []sqltext.Key{k}, sqltext.TryLockStmt(sqltext.Params, scope.SessionGuard(ctx, s), false, shared, k))
}

// wait waits for key on s, in slices; see [scope.Take].
func wait(ctx context.Context, s scope.Session, op string, key advisory.Key, shared bool) error {
	if s == nil {
		return errNilConn
	}
	o := scope.Options{Shared: shared}
	_, err := scope.Take(ctx, scope.DefaultHooks(), s, op, []sqltext.Key{sqltext.KeyOf(key)}, &o, sqltext.Params)
	return err
}

// release releases key on s; see [scope.Release].
func release(ctx context.Context, s scope.Session, op string, key advisory.Key, shared bool) error {
	if s == nil {
		return errNilConn
	}
	k := sqltext.KeyOf(key)
	return scope.Release(ctx, s, op, []sqltext.Key{k}, sqltext.UnlockStmt(sqltext.Params, shared, k))
}
