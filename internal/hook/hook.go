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
