package scope

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"reflect"
	"slices"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// Execer is what *sql.Conn and *sql.Tx have in common.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Run sends one statement, with args, and returns how many rows it
// affected, which is how every boolean answer comes back (see
// internal/sqltext). A nil error while ctx is done is not trusted: a
// driver can report success for a wait whose context expired as it ended,
// after it dropped the session, so Run reports ctx's error instead. The
// statement is guarded (see [Watch]): on a server that does not answer,
// Run returns within ctx's deadline plus [AbortMargin], on lib/pq too,
// and the session is then lost.
func Run(ctx context.Context, e Execer, query string, args ...any) (int64, error) {
	stop := Watch(ctx, e)
	res, err := e.ExecContext(ctx, query, args...)
	stop()
	if err == nil {
		if err = ctx.Err(); err == nil {
			return res.RowsAffected()
		}
	}
	return 0, err
}

// Exec is e.ExecContext, guarded as [Run] is: on a server that does not
// answer, it returns within ctx's deadline plus [AbortMargin].
func Exec(ctx context.Context, e Execer, query string, args ...any) (sql.Result, error) {
	defer Watch(ctx, e)()
	return e.ExecContext(ctx, query, args...)
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
	_ = conn.Raw(func(dc any) error {
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

// ReleaseTimeout bounds a release that runs after the caller's context
// was cancelled.
const ReleaseTimeout = 10 * time.Second

// ReleaseContext returns a context for releasing locks: it keeps ctx's
// values but not its cancellation, so a cancelled caller still releases,
// and it ends after ReleaseTimeout. A ctx that can never end (its Done is
// nil, as context.Background's is) is returned as it is: nothing can cut
// the release short, and the driver is not asked to watch a context,
// which costs it a timer, and on lib/pq a goroutine, per statement. Such a
// release is bounded as the caller's other statements are, by the driver
// and the server alone.
func ReleaseContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Done() == nil {
		return ctx, noCancel
	}
	return detachedContext(ctx)
}

// noCancel is the CancelFunc of a context that needs none.
func noCancel() {}

// detachedContext returns a context that keeps ctx's values but not its
// cancellation, and ends after ReleaseTimeout: a session scope ends under
// it, so that a ctx that ends as the scope ends cannot cut the release
// short and make a lock that was held look lost.
func detachedContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), ReleaseTimeout)
}

// Acquire sends stmt, which takes keys on conn as operation op, and
// reports whether a try took them. On any error the session is discarded,
// since a grant may have raced the failure.
func Acquire(ctx context.Context, conn *sql.Conn, op string, keys []sqltext.Key, stmt sqltext.Stmt) (bool, error) {
	return AcquireWith(ctx, DefaultHooks(), conn, op, keys, stmt)
}

// AcquireWith is Acquire, observed by h (which may be nil).
func AcquireWith(ctx context.Context, h Hooks, conn *sql.Conn, op string, keys []sqltext.Key, stmt sqltext.Stmt) (bool, error) {
	if conn == nil {
		return false, ErrNilConn
	}
	if err := CheckSession(ctx, conn, op, KeyList(keys)); err != nil {
		return false, err
	}
	start := now(h)
	n, err := Run(ctx, conn, stmt.Query, stmt.Args...)
	acquired := false
	if err != nil {
		if refusal(err) == nil || ctx.Err() != nil {
			// A refusal takes nothing (see guard.go); any other
			// failure may have raced a grant.
			Discard(conn)
		}
		err = FailWait(ctx, op, KeyList(keys), err)
	} else {
		acquired = n > 0
	}
	if h != nil {
		// A copy, so that keys stays on the caller's stack when nothing
		// is observed.
		h.Acquired(ctx, op, slices.Clone(keys), since(h, start), acquired, err)
	}
	return acquired, err
}

// Release sends stmt, which releases keys on conn as operation op, and
// expects one row per key. A failure or a key that was not held discards
// the session, since what it holds is then in doubt.
func Release(ctx context.Context, conn *sql.Conn, op string, keys []sqltext.Key, stmt sqltext.Stmt) error {
	if conn == nil {
		return ErrNilConn
	}
	rctx, cancel := ReleaseContext(ctx)
	defer cancel()
	n, err := Run(rctx, conn, stmt.Query, stmt.Args...)
	switch {
	case err != nil:
		Discard(conn)
		err = Fail(rctx, op, KeyList(keys), err)
	case n != int64(len(keys)):
		Discard(conn)
		err = FailKind(op, KeyList(keys), ErrNotHeld, nil)
	}
	if h := DefaultHooks(); h != nil {
		h.Released(ctx, op, slices.Clone(keys), err)
	}
	return err
}

// XactAcquire sends stmt, which takes keys in tx as operation op, and
// reports whether a try took them.
func XactAcquire(ctx context.Context, tx *sql.Tx, op string, keys []sqltext.Key, stmt sqltext.Stmt) (bool, error) {
	return XactAcquireWith(ctx, DefaultHooks(), tx, op, keys, stmt)
}

// XactAcquireWith is XactAcquire, observed by h (which may be nil).
func XactAcquireWith(ctx context.Context, h Hooks, tx *sql.Tx, op string, keys []sqltext.Key, stmt sqltext.Stmt) (bool, error) {
	if tx == nil {
		return false, ErrNilTx
	}
	if err := CheckXact(ctx, tx, op, KeyList(keys)); err != nil {
		return false, err
	}
	start := now(h)
	n, err := Run(ctx, tx, stmt.Query, stmt.Args...)
	acquired := false
	if err != nil {
		err = FailWait(ctx, op, KeyList(keys), err)
	} else {
		acquired = n > 0
	}
	if h != nil {
		// A copy, so that keys stays on the caller's stack when nothing
		// is observed.
		h.Acquired(ctx, op, slices.Clone(keys), since(h, start), acquired, err)
	}
	return acquired, err
}
