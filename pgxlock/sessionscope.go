package pgxlock

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/scope"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// WithSessionLock runs fn on a connection of pool that holds a session
// lock on key, and gives the connection back when fn returns. It is
// [advisory.WithSessionLock] for pgx: it acquires a connection, takes the
// lock (waiting, unless [advisory.Try] or [advisory.Wait] says
// otherwise), runs fn, then releases the lock and the connection in one
// statement. The lock is released however fn ends, a panic included,
// which goes on after the release.
//
// WithSessionLock returns nil only when fn returned nil and the lock was
// still held when fn returned; otherwise fn's error, or an error matching
// [advisory.ErrLockLost] when the release found the lock gone. A
// connection in doubt (the release failed, ctx ended, fn panicked, or fn
// left a transaction open on it, which is an error) is closed, so that
// its Release destroys it and no lock goes back to the pool.
//
// A session scope on pgx has no heartbeat: a *pgxpool.Conn runs one
// statement at a time, fn's own. For a lock held for minutes, watched
// while fn runs, use [advisory.Acquire] on database/sql.
func WithSessionLock(ctx context.Context, pool *pgxpool.Pool, key advisory.Key, fn func(ctx context.Context, conn *pgxpool.Conn) error, opts ...advisory.LockOption) error {
	switch {
	case pool == nil:
		return errNilPool
	case fn == nil:
		return errNilFunc
	}
	o, err := scope.ParseOf(opts)
	if err != nil {
		return err
	}
	k := sqltext.KeyOf(key)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return scope.Fail(ctx, "connect", k.String(), err)
	}
	return scope.SessionScopeOn(ctx, (*poolConn)(conn), k, func(ctx context.Context) error { return fn(ctx, conn) }, &o, true, sqltext.Params, nil)
}

// WithSessionLockConn is [WithSessionLock] on a connection the caller
// already has: it takes the lock on conn, runs fn, and releases the lock,
// however fn ends. conn stays the caller's; it is closed only when it is
// in doubt, as WithSessionLock closes its own.
func WithSessionLockConn[C Conn](ctx context.Context, conn C, key advisory.Key, fn func(ctx context.Context, conn C) error, opts ...advisory.LockOption) error {
	s := scopeSession(conn)
	switch {
	case s == nil:
		return errNilConn
	case fn == nil:
		return errNilFunc
	}
	o, err := scope.ParseOf(opts)
	if err != nil {
		return err
	}
	return scope.SessionScopeOn(ctx, s, sqltext.KeyOf(key), func(ctx context.Context) error { return fn(ctx, conn) }, &o, false, sqltext.Params, nil)
}
