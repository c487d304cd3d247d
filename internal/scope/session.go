package scope

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"sync"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// SessionScope runs a session scope on conn: it takes key as o says, runs fn
// with a context that ends when fn returns, and ends the scope with one
// statement that releases key (every session lock, when owned) and finds
// out whether fn left a transaction open. When owned, the scope took conn
// for itself and closes it at the end, which returns the session to the
// pool unless it was discarded.
//
// The scope reports success only when fn returned nil and key was still
// held when fn returned, so fn ran under the lock for its whole length. A
// panic in fn releases the lock before the panic goes on, whenever the
// session still answers.
func SessionScope(ctx context.Context, conn *sql.Conn, key sqltext.Key, fn func(context.Context, *sql.Conn) error, o *Options, owned bool) error {
	form := ConnForm(conn) // conn's driver, through Raw: a scope's conn and a caller's alike
	s := SQLConn(conn)
	op := o.LockOp(false)
	acquired, err := Take(ctx, o.Observed(), s, op, []sqltext.Key{key}, o, form)
	if err == nil && o.Try && !acquired {
		err = FailKind(op, key.String(), ErrNotAcquired, nil)
	}
	if err != nil {
		if owned {
			_ = conn.Close()
		}
		return err
	}

	// With a heartbeat, the scope holds its lock as a lease, and a loss
	// ends fn's context.
	var lease *Lease
	if o.Watched {
		lo := *o
		lo.Fencing = false // a scope has no use for a token
		if lease, err = StartLease(ctx, conn, key, &lo, form, owned); err != nil {
			return err
		}
	}

	// fn's context ends when fn returns, so that database/sql rolls back
	// a transaction fn began on it and left open.
	fnCtx, cancelFn := context.WithCancel(ctx)
	defer cancelFn()
	if lease != nil {
		defer context.AfterFunc(lease.Context(), cancelFn)()
		fnCtx = withOwnMark(fnCtx, lease.mark)
	}
	e := sessionEnd{conn: conn, s: s, key: key, o: o, owned: owned, cancelFn: cancelFn}
	if lease != nil {
		e.pid, e.mark = lease.pid, lease.mark
	}
	end := func(discard bool) error {
		if lease == nil {
			return e.run(ctx, discard)
		}
		return lease.End(ctx, func(context.Context) error { return e.run(ctx, discard) })
	}
	finished := false
	defer func() {
		if !finished {
			// fn panicked or called runtime.Goexit: release now, so
			// that the lock is gone before the panic goes on.
			_ = end(true)
		}
	}()
	fnErr := fn(fnCtx, conn)
	finished = true
	// A context that ended while fn ran may have dropped the session, or
	// left a cancel in flight that could hit its next user.
	return Join(fnErr, end(ctx.Err() != nil))
}

// sessionEnd ends a session scope.
type sessionEnd struct {
	conn     *sql.Conn // fn's, and the lease's
	s        Session   // conn's, for the statement that ends the scope
	key      sqltext.Key
	o        *Options
	owned    bool
	pid      int64 // the lease's backend, with a heartbeat
	mark     int64 // the lease's mark, with a heartbeat; 0 without
	cancelFn context.CancelFunc
}

// run releases the scope's lock and closes or discards its connection. It
// reports ErrLockLost when the lock could not be confirmed held, and
// errTxLeftOpen when fn left a transaction open. With discard set, the
// session is closed even after a clean release.
func (e *sessionEnd) run(ctx context.Context, discard bool) error {
	rctx, cancel := detachedContext(ctx)
	defer cancel()
	stmt := e.o.EndStatement(e.key, e.owned, e.pid, e.mark)
	n, err := run(rctx, e.s, stmt)
	if e.owned && err != nil && rctx.Err() == nil && SQLState(err) == "57014" {
		// A cancel request that came too late for the statement it was
		// sent for (a driver set to send them, such as pgx with its
		// cancel-request handler, sends them on a connection of its own,
		// and the server acts on one whenever it lands) ended this one
		// instead. Session locks are not transactional, so the cancel may
		// have landed after the unlock ran; an owned scope's statement
		// ends with pg_advisory_unlock_all(), so sending it again cannot
		// release a lock twice. A caller's conn may hold the key stacked:
		// its scope reports the lock in doubt instead.
		n, err = run(rctx, e.s, stmt)
	}
	var txOpen bool
	n, txOpen = e.answer(n, err)
	if txOpen {
		e.closeUnderTx()
	}
	// Only now end fn's context: the statement above must still see a
	// transaction fn left open on it, and database/sql rolls that back
	// once fn's context ends, and may then close conn.
	e.cancelFn()
	op, keys := e.o.UnlockOp(), e.key.String()
	err = e.end(n, err, txOpen, op, keys, discard)
	if h := e.o.Observed(); h != nil {
		h.Released(ctx, op, []sqltext.Key{e.key}, err)
	}
	return err
}

// answer reads what the statement that ends the scope answered when it
// did not fail: n, the rows it affected, becomes 1 when the scope's lock
// was released on its session, endedElsewhere when a statement that a
// transaction pooler routed to another backend ended the lease's backend
// and its lock with it, and 0 when the lock was not held; txOpen reports a
// transaction left open by fn. [sqltext.EndScope] and, with a heartbeat,
// [sqltext.LeaseEnd] answer in rows of their own.
func (e *sessionEnd) answer(n int64, err error) (int64, bool) {
	if SQLState(err) == "25P02" {
		return 0, true
	}
	if err != nil {
		return 0, false
	}
	if e.mark == 0 {
		return n & 1, n >= 2
	}
	txOpen := n&sqltext.EndTxOpen != 0
	switch n &^ sqltext.EndTxOpen {
	case sqltext.EndReleased:
		return 1, txOpen
	case sqltext.EndEnded:
		return endedElsewhere, txOpen
	}
	return 0, txOpen
}

// endedElsewhere is [sessionEnd.answer]'s answer for a lease's backend
// that the statement ended from another one.
const endedElsewhere = -1

// end acts on what the statement that ends the scope answered, n rows or
// err, and on whether fn left a transaction open, and discards the session
// when discard is set.
func (e *sessionEnd) end(n int64, err error, txOpen bool, op, keys string, discard bool) error {
	switch {
	case txOpen:
		// run has ended the session under it (closeUnderTx).
		return FailKind(op, keys, errTxLeftOpen, err)
	case err == nil && n == 1:
		if discard {
			e.s.Discard()
		}
		e.close()
		return nil
	case err == nil && n == endedElsewhere:
		// A transaction pooler sent the statement to another backend,
		// from which it ended the lease's, and the lock with it, as a
		// lease's end does. Whether the lock was still held when fn
		// returned is not known: the scope cannot report success.
		e.s.Discard()
		e.close()
		return FailKind(op, keys, ErrLockLost, errElsewhere)
	case err == nil:
		e.s.Discard()
		e.close()
		return FailKind(op, keys, ErrLockLost, nil)
	}
	e.s.Discard()
	e.close()
	return FailKind(op, keys, ErrLockLost, err)
}

// closeUnderTx ends the session under a transaction fn left open on conn,
// before fn's context ends: database/sql cannot close the connection until
// that transaction ends, which may be never, and in a failed transaction
// the release did not run. It must run while the transaction is still
// open, since database/sql may close conn once it ends, and a Raw call
// that races a Conn's close makes database/sql panic.
//
// A conn the caller owns is the caller's to close; its driver connection
// is closed here. A conn the scope owns is discarded as well: a goroutine
// closes the driver connection through Raw and reports it bad, and
// database/sql closes conn once the transaction ends. closeUnderTx waits
// until that goroutine is inside Raw, past the point where a close could
// race it.
func (e *sessionEnd) closeUnderTx() {
	if !e.owned {
		CloseDriverConn(e.conn)
		return
	}
	inside := make(chan struct{})
	var once sync.Once
	signal := func() { once.Do(func() { close(inside) }) }
	go func() {
		defer signal() // Raw failed before calling back
		_ = e.conn.Raw(func(dc any) error {
			closeDriverConn(dc)
			signal()
			return driver.ErrBadConn // conn is closed once the transaction ends
		})
	}()
	<-inside
}

// close closes a connection the scope owns.
func (e *sessionEnd) close() {
	if e.owned {
		_ = e.conn.Close()
	}
}
