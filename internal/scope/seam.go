package scope

import "context"

// The engine reaches the server through a seam of small interfaces, the
// shape river gives its drivers: a session that executes a statement,
// reads one row and can be discarded ([Session]), and a transaction that
// executes, reads one row, commits and rolls back ([Tx]). A session scope
// also gives its session back and closes it under a transaction fn left
// open ([ScopeSession]); a lease also has its session to itself for each
// heartbeat and ends it at once after a loss ([LeaseSession]), and opens
// another of its pool's to undo a lock it lost ([SessionSource]). A front end
// provides them over its driver's types; package advisory, the
// database/sql front, provides them over *sql.Conn and *sql.Tx through
// [SQLConn] and [SQLTx] (sqlsession.go). Everything above the seam is the
// engine's, the same for every front end: the statements (internal/sqltext),
// the waits in slices, the guards, the classification of errors, when a
// session is in doubt and must be discarded, and the hooks.
//
// What stays below the seam is what a driver alone can do: bounding a
// statement on a server that stops answering (lib/pq's watchdog), ending
// a session for good instead of pooling it, and knowing which engine
// serves a session, once per server session.
//
// The statement form is not the seam's to say: the front end renders the
// statements of its plain lock calls and passes the form to the waits and
// scopes, since on database/sql a transaction's form depends on who began
// it ([TxForm]).

// A Querier runs the engine's statements in one server session, as a
// [Session] or a [Tx]. It is used by one goroutine at a time.
type Querier interface {
	// Exec sends query with args and returns the number of rows it
	// affected, which is how every boolean answer of the engine's
	// statements comes back (see internal/sqltext). On a server that
	// does not answer, it returns within ctx's deadline plus
	// [AbortMargin], and the session is lost.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	// QueryRow sends query with args. The row's Scan reads its first
	// row, and must be called once, bounded as Exec is.
	QueryRow(ctx context.Context, query string, args ...any) Row
	// Engine returns the engine that serves the session, which the front
	// end identifies once per server session (see [CheckSession]), or
	// nil and a nil error when the session has ended, so that the lock
	// statement fails itself.
	Engine(ctx context.Context) (*Engine, error)
}

// A Row is the answer of [Querier.QueryRow].
type Row interface {
	// Scan copies the row's columns into dest, as (*sql.Row).Scan does.
	Scan(dest ...any) error
}

// A Session is a server session that session locks are taken on. The
// locks it holds end with it.
type Session interface {
	Querier
	// Discard ends the server session instead of returning it to a
	// pool, so that every lock it may hold ends with it. Every statement
	// fails after Discard.
	Discard()
}

// A Tx is a transaction that transaction locks are taken in. The locks it
// holds end when it commits or rolls back.
type Tx interface {
	Querier
	// Commit commits the transaction, bounded as Exec is.
	Commit(ctx context.Context) error
	// Rollback rolls the transaction back, bounded by ctx as Exec is.
	// A transaction that has already ended is not an error. A rollback
	// that cannot be sent may end the session instead, which ends the
	// transaction's locks as well.
	Rollback(ctx context.Context) error
}
