package pgxlock

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgadvisory/pgadvisory/internal/scope"
)

// The engine reaches the server through the seam of internal/scope: a
// session (scope.Session) and a transaction (scope.Tx). These are pgx's
// side of it. pgxConn and poolConn are the pgx values themselves under
// another type, so that handing one to the engine allocates nothing;
// pgxTx wraps a pgx.Tx, an interface.
type (
	pgxConn  pgx.Conn
	poolConn pgxpool.Conn
	pgxTx    struct{ tx pgx.Tx }
)

// Compile-time checks that the adapters implement the seam.
var (
	_ scope.ScopeSession = (*pgxConn)(nil)
	_ scope.ScopeSession = (*poolConn)(nil)
	_ scope.Tx           = (*pgxTx)(nil)
)

// session returns the engine's session of conn, or nil when conn is nil.
func session[C Conn](conn C) scope.Session { return scopeSession(conn) }

// scopeSession returns the session of a scope on conn, or nil when conn
// is nil.
func scopeSession[C Conn](conn C) scope.ScopeSession {
	switch c := any(conn).(type) {
	case *pgx.Conn:
		if c != nil {
			return (*pgxConn)(c)
		}
	case *pgxpool.Conn:
		if c != nil {
			return (*poolConn)(c)
		}
	}
	return nil
}

// transaction returns the engine's transaction of tx, or nil when tx is
// nil.
func transaction(tx pgx.Tx) scope.Tx {
	if tx == nil {
		return nil
	}
	return &pgxTx{tx: tx}
}

// Exec runs query on the connection and returns the rows it affected.
// pgx ends the statement when ctx ends, through the connection's context
// watcher.
func (c *pgxConn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	return rowsAffected((*pgx.Conn)(c).Exec(ctx, query, args...))
}

// QueryRow runs query on the connection; its row is scanned once.
func (c *pgxConn) QueryRow(ctx context.Context, query string, args ...any) scope.Row {
	return (*pgx.Conn)(c).QueryRow(ctx, query, args...)
}

// Query runs query on the connection; its rows are read until closed.
func (c *pgxConn) Query(ctx context.Context, query string, args ...any) (scope.Rows, error) {
	rows, err := (*pgx.Conn)(c).Query(ctx, query, args...)
	if err != nil {
		return nil, err // pgx has closed rows
	}
	return rows, nil
}

// Engine returns the engine that serves the connection's session, or nil
// when the connection is closed.
func (c *pgxConn) Engine(ctx context.Context) (*scope.Engine, error) {
	conn := (*pgx.Conn)(c)
	if conn.IsClosed() {
		return nil, nil // the lock statement fails itself
	}
	return engineOf(ctx, conn.PgConn(), c)
}

// Discard closes the connection, which ends its session on the server
// and every lock the session holds. Every statement on it fails from
// then on.
func (c *pgxConn) Discard() { closeConn((*pgx.Conn)(c)) }

// Exec runs query on the pooled connection and returns the rows it
// affected.
func (c *poolConn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	return rowsAffected((*pgxpool.Conn)(c).Exec(ctx, query, args...))
}

// QueryRow runs query on the pooled connection; its row is scanned once.
func (c *poolConn) QueryRow(ctx context.Context, query string, args ...any) scope.Row {
	return (*pgxpool.Conn)(c).QueryRow(ctx, query, args...)
}

// Query runs query on the pooled connection; its rows are read until
// closed.
func (c *poolConn) Query(ctx context.Context, query string, args ...any) (scope.Rows, error) {
	rows, err := (*pgxpool.Conn)(c).Query(ctx, query, args...)
	if err != nil {
		return nil, err // pgx has closed rows
	}
	return rows, nil
}

// Engine returns the engine that serves the pooled connection's session,
// or nil when the connection is closed.
func (c *poolConn) Engine(ctx context.Context) (*scope.Engine, error) {
	conn := (*pgxpool.Conn)(c).Conn()
	if conn.IsClosed() {
		return nil, nil
	}
	return engineOf(ctx, conn.PgConn(), c)
}

// Discard closes the pgx connection under the pooled one, which ends its
// session and its locks, and leaves the *pgxpool.Conn acquired: every
// statement on it fails from then on, and its Release, which the caller
// makes as always, destroys the connection instead of returning it to the
// pool, since pgxpool destroys a released connection that is closed.
//
// Hijack would take the connection out of the pool as well, but it leaves
// the *pgxpool.Conn without its connection: the caller's next statement on
// it would panic rather than fail, and its Release would do nothing.
func (c *poolConn) Discard() { closeConn((*pgxpool.Conn)(c).Conn()) }

// Close does nothing: a *pgx.Conn is always the caller's, never one a
// scope took for itself.
func (c *pgxConn) Close() {}

// CloseUnderTx closes the connection, which ends its session and a
// transaction fn left open on it.
func (c *pgxConn) CloseUnderTx(bool) { closeConn((*pgx.Conn)(c)) }

// Close releases a pooled connection the scope acquired; pgxpool destroys
// it if it was discarded.
func (c *poolConn) Close() { (*pgxpool.Conn)(c).Release() }

// CloseUnderTx closes the pgx connection under the pooled one, which ends
// its session and a transaction fn left open on it, and releases it when
// the scope acquired it, so that pgxpool destroys it.
func (c *poolConn) CloseUnderTx(owned bool) {
	closeConn((*pgxpool.Conn)(c).Conn())
	if owned {
		(*pgxpool.Conn)(c).Release()
	}
}

// closeTimeout bounds the goodbye that a discard writes to the server;
// the socket closes either way.
const closeTimeout = time.Second

// closeConn closes conn: pgx writes Terminate and closes the socket
// without waiting for an answer, so the server ends the session, and its
// locks, as soon as it reads either.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	_ = conn.Close(ctx)
}

// Exec runs query in the transaction and returns the rows it affected.
func (t *pgxTx) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	return rowsAffected(t.tx.Exec(ctx, query, args...))
}

// QueryRow runs query in the transaction; its row is scanned once.
func (t *pgxTx) QueryRow(ctx context.Context, query string, args ...any) scope.Row {
	return t.tx.QueryRow(ctx, query, args...)
}

// Engine returns the engine that serves the transaction's session, or
// nil when its connection is closed.
func (t *pgxTx) Engine(ctx context.Context) (*scope.Engine, error) {
	conn := t.tx.Conn()
	if conn == nil || conn.IsClosed() {
		return nil, nil
	}
	return engineOf(ctx, conn.PgConn(), t)
}

// Commit commits the transaction under ctx. A commit that fails with the
// transaction still open closes the connection (pgx does), which ends
// the transaction's locks.
func (t *pgxTx) Commit(ctx context.Context) error { return t.tx.Commit(ctx) }

// Rollback rolls the transaction back under ctx. A transaction that has
// already ended (pgx.ErrTxClosed) is not an error. A rollback that fails,
// as under a ctx that has ended, closes the connection (pgx does), which
// ends the transaction and its locks on the server.
func (t *pgxTx) Rollback(ctx context.Context) error {
	if err := t.tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return err
	}
	return nil
}

// rowsAffected is the engine's answer of a statement: the rows its
// command tag says it affected.
func rowsAffected(tag pgconn.CommandTag, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// InBlock reports whether a transaction block is open on the connection,
// from the status the server gave in its last ReadyForQuery, so that a
// wait knows which form of slice to send without asking the server.
func (c *pgxConn) InBlock() (in, known bool) {
	return (*pgx.Conn)(c).PgConn().TxStatus() != 'I', true
}

// InBlock is [pgxConn.InBlock] on the pooled connection.
func (c *poolConn) InBlock() (in, known bool) {
	return (*pgxpool.Conn)(c).Conn().PgConn().TxStatus() != 'I', true
}
