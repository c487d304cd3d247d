package scope

import "context"

// The engine reaches the server through a seam of small interfaces, the
// shape river gives its drivers: a session that executes a statement,
// reads one row or many and can be discarded ([Session]), and a
// transaction that executes, reads one row, commits and rolls back
// ([Tx]). A session scope also gives its session back and closes it under
// a transaction fn left open ([ScopeSession]); a lease also has its
// session to itself for each heartbeat and ends it at once after a loss
// ([LeaseSession]), and opens another of its pool's to undo a lock it
// lost ([SessionSource]). A Locker's [Mux] opens every session it uses
// from a [MuxSource], which also names the pool's engine and statement
// form: its carriers, its waits, and those that undo a lost carrier's
// locks. The only answers of many rows are a carrier's
// ([Session.Query]): which of its locks the session still holds, and what
// a batch of releases released. A front end provides them over its
// driver's types; package advisory, the database/sql front, provides them
// over *sql.Conn, *sql.Tx and *sql.DB through [SQLConn], [SQLTx] and
// [DBSource] (sqlsession.go). Everything above the seam is the engine's,
// the same for every front end: the statements (internal/sqltext), the
// waits in slices, the guards, the carriers' turns and heartbeats, the
// classification of errors, when a session is in doubt and must be
// discarded, and the hooks.
//
// What stays below the seam is what a driver alone can do: bounding a
// statement on a server that stops answering (lib/pq's watchdog), ending
// a session for good instead of pooling it, and knowing which engine
// serves a session, once per server session (once per pool for a Mux).
// A session may also say whether a transaction block is open on it
// ([blockTeller], inblock.go), which pgx's sessions do from the status the
// server last reported; a wait then needs no answer of the server's for
// it. A statement the driver never sent, since the session had died before
// it, is an error matching database/sql/driver.ErrBadConn ([isBadConn]),
// which a Mux tries on another session.
//
// The statement form is the front end's to say, not each session's: the
// front end renders the statements of its plain lock calls and passes the
// form to the waits and scopes, since on database/sql a transaction's
// form depends on who began it ([TxForm]); a [MuxSource] names its pool's.

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

// Rows are the answer of [Session.Query], read one row at a time, as
// *sql.Rows and pgx.Rows are.
type Rows interface {
	// Next advances to the next row, and reports false after the last
	// one or a failure, which Err then tells.
	Next() bool
	// Scan copies the current row's columns into dest.
	Scan(dest ...any) error
	// Err returns the failure that ended Next early, if any.
	Err() error
	// Close ends the answer; the statement is bounded until then.
	Close()
}

// A Session is a server session that session locks are taken on. The
// locks it holds end with it.
type Session interface {
	Querier
	// Query sends query with args and returns its rows, which the caller
	// closes, unless Query fails; it is bounded as Exec is until then. A
	// Locker's carriers read their answers of many rows with it.
	Query(ctx context.Context, query string, args ...any) (Rows, error)
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
