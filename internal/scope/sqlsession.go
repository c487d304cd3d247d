package scope

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// sqlConn is the [Session] of a *sql.Conn, and sqlTx the [Tx] of a
// *sql.Tx: the database/sql front's side of the seam. Each is the
// database/sql value itself under another type, so that handing one to
// the engine allocates nothing.
type (
	sqlConn sql.Conn
	sqlTx   sql.Tx
)

// Compile-time checks that the adapters implement the seam.
var (
	_ LeaseSession = (*sqlConn)(nil)
	_ MuxSource    = dbSource{}
	_ Tx           = (*sqlTx)(nil)
)

// SQLConn returns the [Session] of conn, or nil when conn is nil. Each
// statement on it is watched ([Watch]), its Discard closes the session
// through Raw ([Discard]), and its engine is known per driver connection
// ([CheckSession]).
func SQLConn(conn *sql.Conn) Session {
	if conn == nil {
		return nil
	}
	return (*sqlConn)(conn)
}

// SQLTx returns the [Tx] of tx, or nil when tx is nil. Each statement on
// it is watched ([Watch]), its rollback too ([WatchRollback]), and its
// engine is that of its driver connection ([CheckXact]).
func SQLTx(tx *sql.Tx) Tx {
	if tx == nil {
		return nil
	}
	return (*sqlTx)(tx)
}

// Exec runs query on the conn, watched.
func (c *sqlConn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	conn := (*sql.Conn)(c)
	stop := Watch(ctx, conn)
	res, err := conn.ExecContext(ctx, query, args...)
	stop()
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// QueryRow runs query on the conn, watched until the row is scanned.
func (c *sqlConn) QueryRow(ctx context.Context, query string, args ...any) Row {
	conn := (*sql.Conn)(c)
	stop := Watch(ctx, conn)
	return &watchedRow{row: conn.QueryRowContext(ctx, query, args...), stop: stop}
}

// Query runs query on the conn, watched until its rows are closed.
func (c *sqlConn) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	conn := (*sql.Conn)(c)
	stop := Watch(ctx, conn)
	rows, err := conn.QueryContext(ctx, query, args...)
	if err != nil {
		stop()
		return nil, err
	}
	return &watchedRows{Rows: rows, stop: stop}, nil
}

// Engine returns the engine of the conn's driver connection.
func (c *sqlConn) Engine(ctx context.Context) (*Engine, error) {
	conn := (*sql.Conn)(c)
	dc, ok := identify(conn)
	if !ok {
		return nil, nil // conn is closed: the lock statement fails itself
	}
	return engineOfConn(ctx, dc, c)
}

// Discard closes the conn's session; see [Discard].
func (c *sqlConn) Discard() { Discard((*sql.Conn)(c)) }

// Close closes the conn, which returns its session to the pool unless
// it was discarded.
func (c *sqlConn) Close() { _ = (*sql.Conn)(c).Close() }

// CloseUnderTx ends the session under a transaction fn left open on the
// conn, before fn's context ends: database/sql cannot close the
// connection until that transaction ends, which may be never, and in a
// failed transaction the release did not run. It must run while the
// transaction is still open, since database/sql may close the conn once
// it ends, and a Raw call that races a Conn's close makes database/sql
// panic.
//
// A conn the caller owns is the caller's to close; its driver connection
// is closed here. A conn the scope owns is discarded as well: a goroutine
// closes the driver connection through Raw and reports it bad, and
// database/sql closes the conn once the transaction ends. CloseUnderTx
// waits until that goroutine is inside Raw, past the point where a close
// could race it.
func (c *sqlConn) CloseUnderTx(owned bool) {
	conn := (*sql.Conn)(c)
	if !owned {
		CloseDriverConn(conn)
		return
	}
	inside := make(chan struct{})
	var once sync.Once
	signal := func() { once.Do(func() { close(inside) }) }
	go func() {
		defer signal() // Raw failed before calling back
		_ = conn.Raw(func(dc any) error {
			closeDriverConn(dc)
			signal()
			return driver.ErrBadConn // conn is closed once the transaction ends
		})
	}()
	<-inside
}

// Use runs f with the conn's driver connection to itself, through Raw:
// exec sends a statement on the driver's connection, watched ([Watch]).
// Use reaches the connection through rawConn, so that a close of the
// conn racing it fails it with sql.ErrConnDone instead of making
// database/sql panic.
func (c *sqlConn) Use(f func(exec SessionExec)) error {
	return rawConn((*sql.Conn)(c), func(dc any) error {
		f(func(ctx context.Context, query string) (int64, error) {
			ex, ok := dc.(driver.ExecerContext)
			if !ok {
				return 0, errNoExecer(dc)
			}
			defer Watch(ctx, dc)()
			res, err := ex.ExecContext(ctx, query, nil)
			if err != nil {
				return 0, err
			}
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			return res.RowsAffected()
		})
		return nil
	})
}

// End closes the driver's connection under the conn at once
// ([closeDriverConn]), whatever transaction is open on it, so that the
// server ends the session. It leaves the conn itself open, failing every
// statement, for its owner to close.
func (c *sqlConn) End() {
	_ = rawConn((*sql.Conn)(c), func(dc any) error {
		closeDriverConn(dc)
		return nil
	})
}

// errNoExecer reports a driver's connection dc that a lease cannot send
// a statement on.
func errNoExecer(dc any) error {
	return fmt.Errorf("advisory: the driver's connection (%T) does not implement driver.ExecerContext", dc)
}

// rawConn is conn.Raw, except that a close of conn that races it makes it
// report sql.ErrConnDone instead of panicking. database/sql's Raw, as
// every method of a *sql.Conn, first checks that conn is open, then takes
// conn's lock and reads its driver connection: a close that lands
// between the two (the caller's Close, or database/sql's own after a
// statement reported driver.ErrBadConn), however Conn.Close's doc says it
// is safe beside other calls, has set that connection to nil by the time
// Raw gets the lock, and Raw dereferences it before it calls f. conn is
// closed for good then, and the read lock that Raw took and keeps is one
// that only that close, already done, would wait for. A panic in f goes
// on as it would from Raw.
func rawConn(conn *sql.Conn, f func(dc any) error) (err error) {
	called := false
	defer func() {
		if called {
			return // f's own panic goes on
		}
		if r := recover(); r != nil {
			if _, ok := r.(runtime.Error); !ok {
				panic(r)
			}
			closeRaces.Add(1)
			err = sql.ErrConnDone
		}
	}()
	return conn.Raw(func(dc any) error {
		called = true
		return f(dc)
	})
}

// closeRaces counts the calls rawConn found conn closed under, for tests.
var closeRaces atomic.Int64

// DBSource returns the [MuxSource] of db, or nil when db is nil: each
// session is a connection of db's ([SQLConn]), its engine db's
// ([CheckDB]), its form that of db's driver ([DBForm]).
func DBSource(db *sql.DB) MuxSource {
	if db == nil {
		return nil
	}
	return dbSource{db}
}

// dbSource is the MuxSource of a *sql.DB.
type dbSource struct{ db *sql.DB }

// OpenSession takes a connection from the pool.
func (d dbSource) OpenSession(ctx context.Context) (ScopeSession, error) {
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return nil, closedPool(err)
	}
	return (*sqlConn)(conn), nil
}

// Engine returns the engine behind the pool, identified once per
// *sql.DB, through one of its connections, as [CheckDB] does.
func (d dbSource) Engine(ctx context.Context) (*Engine, error) {
	return engineOfDB(ctx, d.db, d.db)
}

// Form returns the form of statement the pool's driver runs fastest.
func (d dbSource) Form() sqltext.Form { return DBForm(d.db) }

// closedPool marks err as [errPoolClosed] when it is database/sql's
// error for a closed *sql.DB, which has no exported value to match. The
// mark keeps database/sql's message as it is.
func closedPool(err error) error {
	if err != nil && err.Error() == "sql: database is closed" {
		return poolClosedError{err}
	}
	return err
}

// poolClosedError is database/sql's error for a closed *sql.DB, which
// also matches [errPoolClosed].
type poolClosedError struct{ err error }

// Error returns database/sql's message.
func (e poolClosedError) Error() string { return e.err.Error() }

// Unwrap returns errPoolClosed and database/sql's error.
func (e poolClosedError) Unwrap() []error { return []error{errPoolClosed, e.err} }

// isBadConn reports a statement the driver did not send, since the
// connection had died: database/sql's driver.ErrBadConn, which a Mux
// tries on another session (see [retryable]).
func isBadConn(err error) bool { return errors.Is(err, driver.ErrBadConn) }

// Exec runs query in the transaction, watched.
func (t *sqlTx) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tx := (*sql.Tx)(t)
	stop := Watch(ctx, tx)
	res, err := tx.ExecContext(ctx, query, args...)
	stop()
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// QueryRow runs query in the transaction, watched until the row is
// scanned.
func (t *sqlTx) QueryRow(ctx context.Context, query string, args ...any) Row {
	tx := (*sql.Tx)(t)
	stop := Watch(ctx, tx)
	return &watchedRow{row: tx.QueryRowContext(ctx, query, args...), stop: stop}
}

// Engine returns the engine of the transaction's driver connection. A
// *sql.Tx has no Raw: its driver connection is the one the watchdog finds
// ([txDriverConn]). When it cannot be found, because tx has ended (the
// lock statement then fails itself) or this Go release lays database/sql
// out otherwise (TestTxDriverConn fails first), the lock goes unchecked.
func (t *sqlTx) Engine(ctx context.Context) (*Engine, error) {
	tx := (*sql.Tx)(t)
	c := txDriverConn(tx)
	if c == nil {
		return nil, nil
	}
	return engineOfConn(ctx, driverConnOf(c), t)
}

// Commit commits the transaction, watched under ctx: database/sql's
// Commit takes no context, and lib/pq's COMMIT watches none.
func (t *sqlTx) Commit(ctx context.Context) error {
	tx := (*sql.Tx)(t)
	defer Watch(ctx, tx)()
	return tx.Commit()
}

// Rollback rolls the transaction back, watched under ctx and under the
// context the transaction began under ([WatchRollback]): database/sql's
// Rollback takes no context, and lib/pq's ROLLBACK watches none. A
// transaction that ctx or fn already ended (sql.ErrTxDone) is not an
// error.
func (t *sqlTx) Rollback(ctx context.Context) error {
	tx := (*sql.Tx)(t)
	defer WatchRollback(tx)()
	defer Watch(ctx, tx)()
	if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return err
	}
	return nil
}

// watchedRow is a *sql.Row whose statement is watched until its Scan
// returns.
type watchedRow struct {
	row  *sql.Row
	stop func()
}

// Scan scans the row and stops its watchdog.
func (r *watchedRow) Scan(dest ...any) error {
	defer r.stop()
	return r.row.Scan(dest...)
}

// watchedRows are *sql.Rows whose statement is watched until they are
// closed.
type watchedRows struct {
	*sql.Rows
	stop func()
}

// Close closes the rows and stops their watchdog.
func (r *watchedRows) Close() {
	_ = r.Rows.Close()
	r.stop()
}

// Discard closes the session behind conn instead of returning it to the
// pool, so that any lock it may hold ends with it. Closing a *sql.Conn
// would return the session, locks and all; only a Raw callback that reports
// driver.ErrBadConn makes database/sql close the driver connection, and
// [unpool] makes sure that the close ends the session. After Discard, conn
// reports sql.ErrConnDone. Discard waits for a transaction open on conn to
// end, as database/sql's close does. On pgx, unpool has closed the
// connection before that, and the transaction fails from then on; on other
// drivers the connection closes when the transaction ends. See
// [CloseDriverConn] for a session whose transaction may never end.
func Discard(conn *sql.Conn) {
	_ = rawConn(conn, func(dc any) error {
		unpool(dc)
		return driver.ErrBadConn
	})
}

// CloseDriverConn closes the driver's connection under conn at once, so
// that the server ends the session and releases its locks, without waiting
// for a transaction that is open on conn: database/sql would wait for it
// before closing. conn stays the caller's to close, and fails every
// statement until then. Nothing touches conn after CloseDriverConn
// returns, and the caller must not close conn while it runs: database/sql
// does not allow a Raw call to race a Conn's close.
func CloseDriverConn(conn *sql.Conn) {
	_ = conn.Raw(func(dc any) error {
		closeDriverConn(dc)
		return nil
	})
}

// closeDriverConn closes a driver's connection. On pgx, [unpool] closes
// pgx's own connection first, so that pgxpool, which the close may hand it
// to, gets it closed and only destroys it, with no statement of
// database/sql's racing its own goroutine. A driver whose
// connection reports its own health (driver.Validator) but does not mark
// itself bad when closed (lib/pq) learns it from a ping that cannot be
// sent, so that database/sql drops the connection instead of pooling it.
func closeDriverConn(dc any) {
	unpool(dc)
	if c, ok := dc.(driver.Conn); ok {
		_ = c.Close()
	}
	if _, ok := dc.(driver.Validator); !ok {
		return
	}
	if p, ok := dc.(driver.Pinger); ok {
		_ = p.Ping(context.Background())
	}
}

// unpool closes the connection behind dc, a driver's connection, at once,
// when closing dc might not: pgx's connection on a *sql.DB from
// stdlib.OpenDBFromPool goes back to pgxpool when database/sql closes it,
// locks and all, unless it is closed, busy or in a transaction. And
// database/sql closes a *sql.Conn discarded while a transaction is open
// on it only once that transaction ends. So on pgx, unpool closes pgx's
// own connection under dc: the server ends the session, and its locks, as
// soon as it reads the goodbye or sees the socket close, whatever
// database/sql does next, and pgxpool destroys the connection when it
// comes back. A transaction open on dc fails from then on.
//
// pgx's connection is reached through the Conn method of pgx's driver
// connection, which returns it, by reflection, so that advisory imports no
// driver; it is closed through its Close(context.Context) method, which
// sends Terminate and closes the socket without waiting for an answer. A
// driver connection without that method is left alone.
func unpool(dc any) {
	if !isPgx(dc) {
		return
	}
	conn := reflect.ValueOf(dc).MethodByName("Conn")
	if !conn.IsValid() || conn.Type().NumIn() != 0 || conn.Type().NumOut() != 1 {
		return
	}
	pc := conn.Call(nil)[0]
	c, ok := pc.Interface().(interface{ Close(context.Context) error })
	if !ok || pc.Kind() == reflect.Pointer && pc.IsNil() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), unpoolTimeout)
	defer cancel()
	_ = c.Close(ctx)
}

// unpoolTimeout bounds the context pgx watches while unpool's close writes
// its goodbye to the server; the socket closes either way.
const unpoolTimeout = time.Second
