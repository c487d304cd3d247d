// Package hook lets the other packages of this module use what package
// advisory keeps unexported, without widening advisory's public API.
// advisory sets every hook when it is initialised, so a package that
// imports advisory can rely on them.
package hook

import (
	"context"
	"database/sql"
)

// CheckOptions validates opts, a []advisory.Option, as the scoped helpers
// do, and returns the *sql.TxOptions they carry (or nil). sqlxlock uses it
// to refuse bad options before it begins anything, and to begin its
// *sqlx.Tx as advisory.WithXactLock would begin a *sql.Tx.
var CheckOptions func(opts any) (*sql.TxOptions, error)

// Fail reports err, which operation op (such as "begin") on keys (or "")
// returned under ctx, as advisory reports its own failures: classified by
// SQLSTATE, and matching ctx's error when ctx had ended.
var Fail func(ctx context.Context, op, keys string, err error) error

// Scope describes what a scoped helper sends for one key and one list of
// options.
type Scope struct {
	Lock    string // the statement that takes the lock
	Unlock  string // the statement that releases a session lock on the caller's conn
	Release string // the statement that ends a session scope on a conn it owns
	Try     bool   // whether the lock statement can answer "not acquired"
}

// ScopeSQL returns what advisory.WithXactLock (xact true) or
// advisory.WithSessionLock sends for key, an advisory.Key, under opts, a
// []advisory.Option, or the error advisory returns for those options. The
// mock package builds its expectations from it, so that they cannot drift
// from what advisory sends.
var ScopeSQL func(opts any, xact bool, key any) (Scope, error)

// OwnedSessionScope runs advisory.WithSessionLock's scope on conn, which
// the caller took from a pool for this scope alone: it takes the lock on
// key (an advisory.Key) as opts (a []advisory.Option) say, runs fn,
// releases every session lock, and closes conn, or discards the session
// when in doubt. sqlxlock uses it so that its *sqlx.Conn scope keeps every
// guarantee of advisory's.
var OwnedSessionScope func(ctx context.Context, conn *sql.Conn, key any, fn func(context.Context, *sql.Conn) error, opts any) error
