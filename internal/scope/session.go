package scope

import (
	"context"
	"database/sql"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// A ScopeSession is the session of a session scope: a [Session] that the
// scope can also give back and close under a transaction fn left open.
type ScopeSession interface {
	Session
	// Close gives back a session the scope took for itself (owned), to
	// its pool unless it was discarded.
	Close()
	// CloseUnderTx ends the server session at once, though a transaction
	// fn began on it is still open, which may never end; owned says
	// whether the scope took the session for itself.
	CloseUnderTx(owned bool)
}

// SessionScope runs a session scope on conn: it takes key as o says, runs fn
// with a context that ends when fn returns, and ends the scope with one
// statement that releases key (every session lock, when owned) and finds
// out whether fn left a transaction open. When owned, the scope took conn
// for itself and closes it at the end, which returns the session to the
// pool unless it was discarded. With a heartbeat (o.Watched), the scope
// holds its lock as a lease, and a loss ends fn's context.
//
// The scope reports success only when fn returned nil and key was still
// held when fn returned, so fn ran under the lock for its whole length. A
// panic in fn releases the lock before the panic goes on, whenever the
// session still answers.
func SessionScope(ctx context.Context, conn *sql.Conn, key sqltext.Key, fn func(context.Context, *sql.Conn) error, o *Options, owned bool) error {
	form := ConnForm(conn) // conn's driver, through Raw: a scope's conn and a caller's alike
	var lease func(context.Context) (*Lease, error)
	if o.Watched {
		lease = func(ctx context.Context) (*Lease, error) {
			lo := *o
			lo.Fencing = false // a scope has no use for a token
			return StartLease(ctx, conn, key, &lo, form, owned)
		}
	}
	return SessionScopeOn(ctx, (*sqlConn)(conn), key, func(ctx context.Context) error { return fn(ctx, conn) }, o, owned, form, lease)
}

// SessionScopeOn is [SessionScope] on any front end's session s, its
// statements in form f. lease, when not nil, starts the lease that holds
// the scope's lock once it is taken; a front end whose sessions cannot
// carry a heartbeat beside fn's own statements passes nil.
func SessionScopeOn(ctx context.Context, s ScopeSession, key sqltext.Key, fn func(context.Context) error, o *Options, owned bool, f sqltext.Form, lease func(context.Context) (*Lease, error)) error {
	op := o.LockOp(false)
	acquired, err := Take(ctx, o.Observed(), s, op, []sqltext.Key{key}, o, f)
	if err == nil && o.Try && !acquired {
		err = FailKind(op, key.String(), ErrNotAcquired, nil)
	}
	if err != nil {
		if owned {
			s.Close()
		}
		return err
	}

	var l *Lease
	if lease != nil {
		if l, err = lease(ctx); err != nil {
			return err
		}
	}

	// fn's context ends when fn returns, so that database/sql rolls back
	// a transaction fn began on it and left open.
	fnCtx, cancelFn := context.WithCancel(ctx)
	defer cancelFn()
	if l != nil {
		defer context.AfterFunc(l.Context(), cancelFn)()
		fnCtx = withOwnMark(fnCtx, l.mark)
	}
	e := sessionEnd{s: s, key: key, o: o, owned: owned, cancelFn: cancelFn}
	if l != nil {
		e.pid, e.mark = l.pid, l.mark
	}
	end := func(discard bool) error {
		if l == nil {
			return e.run(ctx, discard)
		}
		return l.End(ctx, func(context.Context) error { return e.run(ctx, discard) })
	}
	finished := false
	defer func() {
		if !finished {
			// fn panicked or called runtime.Goexit: release now, so
			// that the lock is gone before the panic goes on.
			_ = end(true)
		}
	}()
	fnErr := fn(fnCtx)
	finished = true
	// A context that ended while fn ran may have dropped the session, or
	// left a cancel in flight that could hit its next user.
	return Join(fnErr, end(ctx.Err() != nil))
}

// sessionEnd ends a session scope.
type sessionEnd struct {
	s        ScopeSession // fn's, and the lease's
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
		e.s.CloseUnderTx(e.owned)
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

// close gives back a session the scope owns.
func (e *sessionEnd) close() {
	if e.owned {
		e.s.Close()
	}
}
