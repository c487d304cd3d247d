// Package scope is the engine behind package advisory's lock functions and
// scoped helpers, shared with the packages that wrap them: the options and
// their checks, the classification of errors, the statements' execution,
// and the session and transaction scopes. advisory, sqlxlock and mock call
// it directly, so each of them takes locks, reports failures and expects
// statements exactly as advisory does.
//
// The lock calls, the waits in slices and the scopes' lock and unlock
// statements run on a seam (seam.go): a [Session] or [Tx] that executes a
// statement, reads one row, and is discarded or ends. database/sql's are
// [SQLConn] and [SQLTx] (sqlsession.go), which carry what only
// database/sql needs: lib/pq's watchdog, the discard through Raw, pgx's
// pool discard. The leases, the Locker's carriers and the engine cache
// still work on *sql.Conn and *sql.DB.
//
// It imports the standard library and internal/sqltext only.
package scope
