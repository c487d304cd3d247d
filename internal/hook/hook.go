// Package hook lets the other packages of this module read what package
// advisory keeps unexported, without widening advisory's public API.
// advisory sets every hook when it is initialised, so a package that
// imports advisory can rely on them.
package hook

import "database/sql"

// TxOptions returns the *sql.TxOptions that a list of advisory.Option
// carries, or nil; opts is a []advisory.Option. sqlxlock uses it to begin
// its *sqlx.Tx as advisory.WithXactLock would begin a *sql.Tx.
var TxOptions func(opts any) *sql.TxOptions

// Scope describes what a scoped helper sends for one key and one list of
// options.
type Scope struct {
	Lock   string // the statement that takes the lock
	Unlock string // the statement that releases a session lock
	Try    bool   // whether the lock statement can answer "not acquired"
}

// ScopeSQL returns what advisory.WithXactLock (xact true) or
// advisory.WithSessionLock sends for key, an advisory.Key, under opts, a
// []advisory.Option, or the error advisory returns for those options. The
// mock package builds its expectations from it, so that they cannot drift
// from what advisory sends.
var ScopeSQL func(opts any, xact bool, key any) (Scope, error)
