package scope

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// DefaultHeartbeat is the heartbeat interval of a lease when Heartbeat is
// not given.
const DefaultHeartbeat = 5 * time.Second

// Errors a lease's start reports.
var (
	ErrStandby       = errors.New("advisory: the server is a hot standby, where advisory locks coordinate nothing with the primary")
	ErrSharedSession = errors.New("advisory: the session is shared: a transaction pooler (such as PgBouncer in transaction mode) sits between the client and the server, and session locks cannot work through it")
)

// errReleased is the cause of a released lease's context.
var errReleased = errors.New("advisory: lease released")

// A Lease is a session lock on a connection of its own, watched by a
// heartbeat that proves, every interval, that the backend still holds the
// key. Its context ends the moment the lock is lost or released.
type Lease struct {
	s        LeaseSession
	key      sqltext.Key
	o        Options
	owned    bool
	pid      int64
	mark     int64 // the lease's mark on its session; see sqltext.LeaseStart
	token    int64
	interval time.Duration
	holds    string // the heartbeat statement that reads pg_locks
	alive    string // the heartbeat statement of the beats between

	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   chan struct{} // closed by Release
	done   chan struct{} // closed when the heartbeat has stopped

	mu        sync.Mutex
	err       error // set once: the loss, or context.Canceled on release
	beats     int64 // heartbeats sent and ended; see Beats
	finished  bool  // the heartbeat no longer works on conn
	abandoned bool  // Release stopped waiting for the heartbeat, which then ends the session itself
	relErr    error // what Release returned
	endOnce   sync.Once
}

// StartLease starts the lease of a session lock that conn has just taken
// on key as o says: one round trip confirms the backend holds the key,
// refuses a hot standby and a shared session, and takes a fencing token
// when o asks for one; then a goroutine starts the heartbeat. When owned,
// the lease took conn for itself and closes it at the end. On error the
// session has been discarded, and the lock with it.
func StartLease(ctx context.Context, conn *sql.Conn, key sqltext.Key, o *Options, form sqltext.Form, owned bool) (*Lease, error) {
	return StartLeaseOn(ctx, (*sqlConn)(conn), key, o, form, owned)
}

// StartLeaseOn is [StartLease] on any front end's session s, its
// statements in form f.
func StartLeaseOn(ctx context.Context, s LeaseSession, key sqltext.Key, o *Options, form sqltext.Form, owned bool) (*Lease, error) {
	l := &Lease{s: s, key: key, o: *o, owned: owned, interval: o.HeartbeatInterval()}
	if err := checkSession(ctx, s, "lease", key.String()); err != nil {
		l.discard()
		return nil, err
	}
	var token sql.NullInt64
	var standby, held bool
	// The mark, a random number the server draws and leaves on the
	// session, tells this lease from another client's on the same
	// backend, as behind a transaction pooler. The server sets it only on
	// a backend that holds the key and bears no mark yet; otherwise it is
	// NULL, and the lease is refused.
	var mark sql.NullInt64
	// other names another backend that holds the key exclusively: the
	// one that took it, when a pooler ran the start elsewhere.
	var other sql.NullInt64
	stmt := sqltext.LeaseStart(form, o.Shared, key, o.Fencing)
	start := func() error {
		return s.QueryRow(ctx, stmt.Query, stmt.Args...).Scan(&l.pid, &standby, &held, &token, &mark, &other)
	}
	err := start()
	if o.Fencing && SQLState(err) == "42P01" {
		// The first fencing token ever taken on this database: create
		// the sequence, and ask again. Two first users may race: IF NOT
		// EXISTS does not stop the loser from failing on the catalog's
		// unique index.
		_, err = run(ctx, s, sqltext.CreateFencingSequence)
		if err == nil || SQLState(err) == "23505" || SQLState(err) == "42P07" {
			err = start()
		}
	}
	switch {
	case pooledStatement(err):
		err = FailKind("lease", key.String(), ErrSharedSession, err)
	case err != nil:
		err = Fail(ctx, "lease", key.String(), err)
	case standby:
		err = FailKind("lease", key.String(), ErrStandby, nil)
	case !held || !mark.Valid:
		// A transaction pooler ran the statement on another backend
		// than the lock statement's, or on one that another client's
		// lease marked. The lock is held on a backend where no
		// heartbeat would ever find it: undo it there.
		l.undoRefused(ctx, other)
		err = FailKind("lease", key.String(), ErrSharedSession, nil)
	}
	if err != nil {
		l.discard()
		return nil, err
	}
	l.token = token.Int64
	l.mark = mark.Int64
	l.holds = sqltext.Holds(l.pid, o.Shared, key, l.mark)
	l.alive = sqltext.Alive(l.pid, l.mark)
	holdMark(s, l.mark) // until discard or release: see guard.go
	l.ctx, l.cancel = context.WithCancelCause(withOwnMark(context.WithoutCancel(ctx), l.mark))
	l.stop, l.done = make(chan struct{}), make(chan struct{})
	go l.watch()
	return l, nil
}

// Context returns the lease's context, cancelled when the lease is lost or
// released; context.Cause tells which.
func (l *Lease) Context() context.Context { return l.ctx }

// Token returns the fencing token, or 0 without fencing.
func (l *Lease) Token() int64 { return l.token }

// Beats returns how many heartbeats the lease has sent whose statement
// has ended, answered or not. Tests count a heartbeat's round trips with
// it.
func (l *Lease) Beats() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.beats
}

// Err returns nil while the lease holds, an error matching ErrLockLost
// after a loss, and context.Canceled after Release.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// watch runs the heartbeat until Release or a loss.
//
// Every call the heartbeat makes on conn goes through rawConn, so that a
// close of conn that races it (the caller's, or database/sql's own after
// a statement of the caller's met a dead session) fails the call instead
// of making database/sql panic; and the heartbeat never closes conn
// itself, since the caller may be running a statement on it (a session
// scope's fn does, beside the heartbeat), which such a close would make
// panic in the same way. Release, which waits for the heartbeat to stop,
// closes conn.
func (l *Lease) watch() {
	defer close(l.done)
	defer l.stopped()
	t := time.NewTimer(l.interval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		if err := l.beat(); err != nil {
			l.lost(err)
			return
		}
		t.Reset(l.interval)
	}
}

// lost acts on a loss the heartbeat found: it records it, undoes the lock
// and the mark where the server answers, and ends the session.
func (l *Lease) lost(err error) {
	l.lose(err)
	// Behind a transaction pooler, closing the connection ends nothing
	// on the server: undo the lock and the mark first, unless the server
	// did not answer, when the session is ended at once, and the lock is
	// undone through another connection of the lease's pool. So is a
	// lock whose undoing failed, as when the pooler sent the statement
	// to a backend that another client's end was ending.
	undone := !errors.Is(err, errNoAnswer) && l.reclaim() == nil
	l.endSession()
	if !undone {
		l.reclaimElsewhere(context.Background())
	}
}

// reclaimElsewhere undoes the lease's lock and mark through another
// connection of the lease's pool, when it has one ([Lease.reclaimFrom]),
// after its own session could not. A statement that itself gets no
// answer in time, as on a loaded server or behind a pooler whose one
// backend is still busy, is tried again, each try bounded as the first,
// until one succeeds, ctx ends or [reclaimFromWithin] has passed.
func (l *Lease) reclaimElsewhere(ctx context.Context) {
	if l.o.Spare == nil {
		return
	}
	_ = retryWithin(ctx, reclaimFromWithin, func() error { return l.reclaimFrom(l.o.Spare) })
}

// reclaimFrom undoes, after a loss for want of an answer, the lease's lock
// and mark through a connection of db's, since the lease's own connection
// is closed. On a direct connection the closed session ends, and its
// locks with it, once the server reads the close; the statement finds
// nothing to do, or ends that backend a moment sooner. Behind a
// transaction pooler the answer may have come just too late: the pooler
// then put the lease's backend back in its pool, lock and mark and all,
// where nothing of the lease's would ever reach it again. The statement
// ([sqltext.LeaseEndFrom]) releases them if the pooler sends it to that
// backend, and ends that backend, while it holds the key, if it sends it
// elsewhere. It is bounded
// as [Lease.reclaim] is, and its connection is discarded if it fails.
func (l *Lease) reclaimFrom(src SessionSource) error {
	ctx, cancel := context.WithTimeout(context.Background(), max(l.interval, reclaimTimeout))
	defer cancel()
	s, err := src.OpenSession(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err := run(ctx, s, sqltext.LeaseEndFrom(l.pid, l.mark, l.o.Shared, l.owned, l.key)); err != nil {
		s.Discard()
		return err
	}
	return nil
}

// stopped records that the heartbeat no longer works on conn. If Release
// gave up waiting for it, nothing else will end the lease: it ends the
// session, whose lock it may still hold (a heartbeat that answered after
// Release gave up found no loss), and discards conn when the lease owns
// it. A caller's conn is the caller's to close once Release has returned.
func (l *Lease) stopped() {
	l.mu.Lock()
	l.finished = true
	abandoned := l.abandoned
	l.mu.Unlock()
	if abandoned {
		l.endSession()
		if l.owned {
			l.discard()
		}
	}
}

// abandon records that Release stops waiting for the heartbeat, unless
// the heartbeat has stopped, and reports whether it had not.
func (l *Lease) abandon() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.finished {
		return false
	}
	l.abandoned = true
	return true
}

// beat proves the lock with one round trip, bounded by the heartbeat
// interval. It runs the statement on the driver's connection through
// Raw, so that time spent waiting for a statement of the caller's on the
// same connection does not count against the bound. If the server does
// not answer in time, the loss is signalled at once, even though the
// statement may go on until the driver gives it up.
func (l *Lease) beat() error {
	// Every CountEvery beats, the heartbeat finds the lock in pg_locks;
	// the beats between prove the session and its mark.
	l.mu.Lock()
	stmt, count := l.alive, l.beats%CountEvery == 0
	l.mu.Unlock()
	if count {
		stmt = l.holds
	}
	var n int64
	var err error
	rawErr := l.s.Use(func(exec SessionExec) {
		ctx, cancel := context.WithTimeout(context.Background(), l.interval)
		defer cancel()
		late := context.AfterFunc(ctx, func() {
			l.lose(fmt.Errorf("heartbeat: no answer within %v", l.interval))
		})
		defer late()
		n, err = exec(ctx, stmt)
		l.mu.Lock()
		l.beats++
		l.mu.Unlock()
		if ctx.Err() != nil {
			err = fmt.Errorf("%w within %v: %w", errNoAnswer, l.interval, ctx.Err())
		}
	})
	switch {
	case rawErr != nil:
		return rawErr
	case SQLState(err) == "25P02":
		// A transaction of the caller's failed on this connection: the
		// session answered, so it lives, and its locks with it.
		return nil
	case err != nil:
		return err
	case n == sqltext.HoldsElsewhere:
		return FailKind("heartbeat", l.key.String(), ErrSharedSession, errElsewhere)
	case n != 1 && !count:
		return errors.New("heartbeat: the session no longer bears the lease's mark")
	case n != 1:
		return errors.New("heartbeat: the session no longer holds the lock")
	}
	return nil
}

// lose records the loss, once, and cancels the lease's context.
func (l *Lease) lose(cause error) {
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return
	}
	err := FailKind("lease", l.key.String(), ErrLockLost, cause)
	l.err = err
	l.cancel(err)
	l.mu.Unlock()
	// The observer is the caller's code: it runs without the lease's lock.
	if h := l.o.Observed(); h != nil {
		h.Lost(l.ctx, l.key, cause)
	}
}

// discard closes the session, so that the server drops whatever it holds,
// and closes conn when the lease owns it: as [Discard], through rawConn.
// database/sql closes conn once a transaction open on it has ended.
func (l *Lease) discard() {
	dropMark(l.s)
	l.s.Discard()
	if l.owned {
		l.s.Close()
	}
}

// endSession ends the lease's session after a loss, so that the server
// drops whatever it holds, by closing the driver's connection under conn
// at once ([closeDriverConn]), whatever transaction is open on it. It
// leaves conn itself open, and failing every statement, for Release to
// close: see [Lease.watch].
func (l *Lease) endSession() {
	dropMark(l.s)
	l.s.End()
}

// discardWithin discards conn after a loss, whose session the heartbeat
// has ended, waiting at most until ctx ends: database/sql closes conn only
// once a transaction open on it has ended, and one that fn left open may
// never end. database/sql's close marks conn closed before it waits for
// that transaction, so that a later call on conn reports sql.ErrConnDone.
func (l *Lease) discardWithin(ctx context.Context) {
	discarded := make(chan struct{})
	go func() {
		defer close(discarded)
		l.discard()
	}()
	select {
	case <-discarded:
	case <-ctx.Done():
	}
}

// Release stops the heartbeat and releases the lock, once: later calls
// return the first result. It reports an error matching ErrLockLost if
// the lease was lost before it. It runs even when ctx has ended: it waits
// for a heartbeat in flight, and releases under ctx's values without its
// cancellation, giving up after ReleaseTimeout.
func (l *Lease) Release(ctx context.Context) error {
	l.endOnce.Do(func() { l.relErr = l.release(ctx, nil) })
	return l.relErr
}

// End is Release for a scope whose fn has returned: end is the scope's end
// of session, which releases the lock and tells a transaction left open.
func (l *Lease) End(ctx context.Context, end func(ctx context.Context) error) error {
	l.endOnce.Do(func() { l.relErr = l.release(ctx, end) })
	return l.relErr
}

func (l *Lease) release(ctx context.Context, end func(context.Context) error) error {
	close(l.stop)
	defer dropMark(l.s)
	// Wait for the heartbeat to stop, even when ctx has ended, and after a
	// loss too: until it has, it may still use conn, and after a loss it
	// undoes the lock behind a pooler and ends the session before it
	// stops. A Release that returned sooner would let its caller close
	// conn under the heartbeat, which database/sql does not survive (a
	// Raw call that a Conn's close races panics), and which would put the
	// session back in the pool, lock and mark and all, before the
	// heartbeat ended it. The heartbeat's own deadline bounds a heartbeat
	// in flight; ReleaseTimeout bounds the wait for a driver that does not
	// give a statement up.
	wctx, cancel := detachedContext(ctx)
	defer cancel()
	select {
	case <-l.done:
	case <-wctx.Done():
		if l.abandon() {
			// A heartbeat is stuck on a server that does not answer;
			// it ends the session when the driver gives up.
			l.lose(fmt.Errorf("release: no heartbeat ended within %v", ReleaseTimeout))
			return l.Err()
		}
		// The heartbeat stopped as the wait ran out.
	}
	if err := l.Err(); err != nil {
		// The heartbeat has ended the session; conn goes now, with no
		// call of the lease's left to race its close.
		l.discardWithin(wctx)
		return err
	}
	l.mu.Lock()
	l.err = context.Canceled
	l.mu.Unlock()
	defer l.cancel(errReleased)
	if end != nil {
		return end(ctx)
	}
	return l.end(ctx)
}

// end releases the lease's lock with one statement that acts only on the
// lease's own session ([sqltext.LeaseEnd]): there it releases the key and
// removes the mark; on another backend, where a transaction pooler routed
// it, it ends the lease's backend, so that neither the lock nor the mark
// stays behind. Then conn is closed, or the session discarded when in
// doubt.
func (l *Lease) end(ctx context.Context) error {
	rctx, cancel := detachedContext(ctx)
	defer cancel()
	n, err := l.run(rctx, sqltext.LeaseEnd(l.pid, l.mark, l.o.Shared, l.owned, l.key))
	op, keys := l.o.UnlockOp(), l.key.String()
	switch {
	case err == nil && n&sqltext.EndTxOpen != 0, SQLState(err) == "25P02":
		// A transaction is open on conn (Watch took over a conn with
		// one): end the session under it, as a session scope does.
		l.s.CloseUnderTx(l.owned)
		err = FailKind(op, keys, errTxLeftOpen, err)
	case err != nil:
		// The session is in doubt: behind a pooler, closing it leaves
		// its backend's lock and mark, which another connection of the
		// pool can still undo.
		l.discard()
		l.reclaimElsewhere(rctx)
		err = FailKind(op, keys, ErrLockLost, err)
	case n == sqltext.EndReleased:
		dropMark(l.s)
		if l.owned {
			l.s.Close()
		}
	case n == sqltext.EndEnded:
		// The lock was released with its backend, behind a pooler.
		l.discard()
	default:
		l.discard()
		err = FailKind(op, keys, ErrLockLost, nil)
	}
	if h := l.o.Observed(); h != nil {
		h.Released(ctx, op, []sqltext.Key{l.key}, err)
	}
	return err
}

// errNoAnswer is the cause of a loss for want of an answer in time.
var errNoAnswer = errors.New("no answer")

// errElsewhere is the cause of a lease's loss when its heartbeat ran on
// another backend than the lease's.
var errElsewhere = errors.New("the statement ran on another backend than the lease's: a transaction pooler sits between the client and the server")

// reclaim undoes, after a loss, the lease's lock and mark on its backend:
// one statement ([sqltext.LeaseEnd]) releases them if it lands there, and
// ends that backend if a transaction pooler routes it elsewhere. On a
// direct connection the session ends with its connection anyway, and on a
// dead one the statement fails at once. The lease is already lost; until
// the statement runs, the lock still excludes every other client.
func (l *Lease) reclaim() error {
	ctx, cancel := context.WithTimeout(context.Background(), max(l.interval, reclaimTimeout))
	defer cancel()
	_, err := l.run(ctx, sqltext.LeaseEnd(l.pid, l.mark, l.o.Shared, l.owned, l.key))
	return err
}

// run sends query, a statement without arguments, on the lease's
// session, through [LeaseSession.Use], and returns the rows it affected;
// as [Run], it trusts no success while ctx is done.
func (l *Lease) run(ctx context.Context, query string) (n int64, err error) {
	if useErr := l.s.Use(func(exec SessionExec) { n, err = exec(ctx, query) }); useErr != nil {
		return 0, useErr
	}
	return n, err
}

// reclaimTimeout bounds a statement that cleans up after a pooler.
const reclaimTimeout = time.Second

// reclaimTries bounds how often a lease refused at its start tries to
// reach the backend that took its lock, reclaimPause apart.
const (
	reclaimTries = 16
	reclaimPause = 2 * time.Millisecond
)

// reclaimGentle is how many of a refused lease's tries to undo its lock
// on the backend it names may only release the lock there, before one
// that ends that backend from another.
const reclaimGentle = 3

// undoRefused undoes the lock that the lock statement of a lease refused
// at its start took. Each try lands where the pooler sends it. When the
// start named the backend that holds the key exclusively (at), a try
// that lands there releases it ([sqltext.LeaseReclaimAt]), and after
// reclaimGentle tries that landed elsewhere, the next ends that backend
// from where it lands, and with it whatever another client of the pooler
// runs there, as a lease's end does (see [sqltext.LeaseEnd]). Otherwise,
// as for a shared lease, a try releases the key on a backend that holds
// it and bears no mark ([sqltext.LeaseReclaim]), and it gives up after
// reclaimTries.
func (l *Lease) undoRefused(ctx context.Context, at sql.NullInt64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(l.interval, reclaimTimeout))
	defer cancel()
	tries := reclaimTries
	if at.Valid {
		tries = reclaimGentle + 1
	}
	for i := range tries {
		last := i == tries-1
		stmt := sqltext.LeaseReclaim(l.o.Shared, l.key)
		if at.Valid {
			stmt = sqltext.LeaseReclaimAt(at.Int64, l.key, last)
		}
		n, err := run(ctx, l.s, stmt)
		if err != nil || n > 0 || last {
			return
		}
		time.Sleep(reclaimPause)
	}
}

// pooledStatement reports an error that only a transaction pooler
// explains: a prepared statement that a driver made on one backend found
// on another under the same name (SQLSTATE 42P05, as pgx's statement
// cache meets behind PgBouncer), or not found where it was made (26000).
func pooledStatement(err error) bool {
	code := SQLState(err)
	return code == "42P05" || code == "26000"
}
