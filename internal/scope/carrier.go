package scope

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// A lockID is what pg_locks shows of a carrier's hold: a key and a mode.
type lockID struct {
	key    sqltext.Key
	shared bool
}

// A carrier is one of a Mux's sessions. It holds many leases' locks on
// one session, and proves them all with one heartbeat. Statements on it
// are serialised by its turn: a goroutine sends one only while it holds
// the turn, and gives it back at once, so no goroutine per lease is
// needed. Every statement is bounded by the heartbeat interval, and one
// that is not answered in time loses the carrier.
type carrier struct {
	m         *Mux
	s         ScopeSession // from the Mux's source
	pid, mark int64
	phase     int64 // the beat, mod CountEvery, at which it counts: see beat

	turn chan struct{} // holds a token while a statement is in flight
	dead chan struct{} // closed when the carrier is lost
	stop chan struct{} // closed by Close
	done chan struct{} // closed when the heartbeat has stopped

	// Guarded by m.mu.
	leases  map[*MuxLease]struct{}
	pending int // acquisitions routed to the carrier and not yet done
	lost    error
	beats   int64 // heartbeats sent and ended; see MuxLease.Beats

	// Guarded by the turn: what pg_locks must show for this session, and
	// how many leases hold each lock.
	locks map[lockID]int

	qmu    sync.Mutex
	queued []*unlockReq // releases waiting for the turn: see release

	downOnce sync.Once // the session's end
	stopOnce sync.Once // close(stop)
}

// openCarrier opens a session from the Mux's source and starts a carrier
// on it: one round trip learns the backend, refuses a hot standby, and
// leaves the carrier's mark on the session.
func (m *Mux) openCarrier(ctx context.Context) (*carrier, error) {
	var err error
	for try := 1; try <= BadConnTries; try++ {
		var c *carrier
		if c, err = m.openCarrierOnce(ctx); err == nil {
			return c, nil
		}
		if !retryable(ctx, err) {
			break
		}
	}
	return nil, err
}

func (m *Mux) openCarrierOnce(ctx context.Context) (*carrier, error) {
	s, err := m.src.OpenSession(ctx)
	if err != nil {
		return nil, Fail(ctx, "connect", "", err)
	}
	c := &carrier{
		m: m, s: s,
		turn: make(chan struct{}, 1), dead: make(chan struct{}),
		stop: make(chan struct{}), done: make(chan struct{}),
		leases: map[*MuxLease]struct{}{}, locks: map[lockID]int{},
	}
	var standby bool
	var mark *int64 // NULL: see below
	err = s.QueryRow(ctx, sqltext.CarrierStart).Scan(&c.pid, &standby, &mark)
	if mark != nil {
		c.mark = *mark
	}
	switch {
	case pooledStatement(err):
		err = FailKind("lease", "", ErrSharedSession, err)
	case err != nil:
		err = Fail(ctx, "lease", "", err)
	case standby:
		err = FailKind("lease", "", ErrStandby, nil)
	case mark == nil:
		// The session bears another lease's mark: behind a transaction
		// pooler, another client's lease holds its locks there.
		err = FailKind("lease", "", ErrSharedSession, errForeignMark)
	}
	if err != nil {
		s.Discard()
		s.Close()
		return nil, err
	}
	m.mu.Lock()
	c.phase = m.opened % CountEvery
	m.opened++
	m.mu.Unlock()
	go c.watch()
	return c, nil
}

// retryable reports whether an error that ended a carrier's start or a
// statement on it is worth another connection: the session was gone
// before it did anything.
func retryable(ctx context.Context, err error) bool {
	return ctx.Err() == nil && (errors.Is(err, errCarrierLost) || isBadConn(err))
}

// errCarrierLost is returned by a statement on a carrier that was lost
// before or while it ran. Nothing was taken by it.
var errCarrierLost = errors.New("advisory: the connection was lost")

// take waits for the carrier's turn. It fails when ctx ends first or the
// carrier is lost.
func (c *carrier) take(ctx context.Context) error {
	select {
	case c.turn <- struct{}{}:
	case <-c.dead:
		return errCarrierLost
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-c.dead:
		c.give()
		return errCarrierLost
	default:
		return nil
	}
}

// give hands the turn back.
func (c *carrier) give() { <-c.turn }

// run sends one statement, f, on the carrier while holding the turn,
// bounded by the heartbeat interval, which f passes to the session's
// statement: the session bounds it on a server that does not answer (see
// [Querier.Exec]). A statement not answered in time loses the carrier at
// once, though f returns only when the driver gives up.
func (c *carrier) run(f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.m.interval)
	defer cancel()
	late := fmt.Errorf("%w within %v", errNoAnswer, c.m.interval)
	stop := context.AfterFunc(ctx, func() { c.lose(late) })
	err := f(ctx)
	stopped := stop()
	switch {
	case !stopped && err == nil:
		// The deadline passed, and the carrier is lost, whatever f
		// got back.
		err = late
	case err != nil && ctx.Err() != nil:
		// The driver gave the statement up at the deadline: no answer
		// came in time, whatever error the driver made of it, so that
		// the loss is undone from elsewhere (see teardown).
		err = fmt.Errorf("%w: %w", late, err)
	}
	return err
}

// survives reports whether the session outlives a try that failed with
// err, having taken nothing: the server answered with an error of its
// own, such as a full lock table (53200), a fencing sequence that does not
// exist yet (42P01) or that the role may not use (42501). Such an error
// comes before the try takes the key or instead of it: the token is drawn
// first, and the try itself takes one key or none. The session is in
// doubt after anything else: no answer, a broken connection (class 08),
// the session ended by the server (57P), a cancel that may have come
// after the grant (57014), or an internal error (XX).
func survives(err error) bool {
	code := SQLState(err)
	switch {
	case code == "", code == "57014",
		strings.HasPrefix(code, "08"), strings.HasPrefix(code, "57P"), strings.HasPrefix(code, "XX"):
		return false
	}
	return true
}

// hold records a new lease on the carrier. The caller holds the turn.
func (c *carrier) hold(l *MuxLease) bool {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	if c.lost != nil {
		return false
	}
	c.leases[l] = struct{}{}
	c.locks[lockID{l.key, l.shared}]++
	return true
}

// drop forgets a lease on the carrier, and reports whether the carrier
// still knew it; the caller then ends the lease's hold on its key in the
// Mux. The caller holds the turn.
func (c *carrier) drop(l *MuxLease) bool {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	if _, ok := c.leases[l]; !ok {
		return false
	}
	delete(c.leases, l)
	id := lockID{l.key, l.shared}
	if c.locks[id]--; c.locks[id] == 0 {
		delete(c.locks, id)
	}
	return true
}

// lose ends the carrier, once: every lease on it is lost with cause, and
// the session is discarded once the statement in flight, if any, has
// returned.
func (c *carrier) lose(cause error) { c.end(cause, true) }

// end ends the carrier, once, for cause: its leases are lost, or, when
// !lost, end as released. Every lease is settled before the carrier is
// seen to be dead, so that a Release that finds it dead reads the lease's
// end; the observer hears of the losses afterwards. It reports whether
// this call ended the carrier.
func (c *carrier) end(cause error, lost bool) bool {
	m := c.m
	m.mu.Lock()
	if c.lost != nil {
		m.mu.Unlock()
		return false
	}
	c.lost = cause
	m.removeLocked(c)
	var notify []*MuxLease
	for l := range c.leases {
		m.unreserveLocked(l.key)
		if !lost {
			l.end(cause)
		} else if l.settleLost(cause) {
			notify = append(notify, l)
		}
	}
	c.leases = nil
	close(c.dead)
	m.mu.Unlock()
	for _, l := range notify {
		l.notifyLost(cause)
	}
	return true
}

// teardown discards the session of an ended carrier, once, after the
// statement in flight, if any, has returned. It keeps the turn, so that
// nothing is sent on the session again.
func (c *carrier) teardown() {
	c.downOnce.Do(func() {
		c.turn <- struct{}{}
		// Behind a transaction pooler, closing the connection ends
		// nothing on the server: the carrier's locks and mark would
		// stay on its pooled backend. Ask once, unless the server did
		// not answer: then the session is closed at once. Either way,
		// when the session did not undo them, another connection of the
		// pool tries.
		c.m.mu.Lock()
		unanswered := errors.Is(c.lost, errNoAnswer)
		c.m.mu.Unlock()
		undone := !unanswered && c.reclaim() == nil
		c.s.Discard()
		c.s.Close()
		if !undone {
			c.reclaimFrom(context.Background())
		}
	})
}

// reclaimFrom undoes, after a loss for want of an answer or a failed
// release, the carrier's locks and mark through another session of the
// Mux's source, since the carrier's own is closed: as [Lease.reclaimFrom]
// does for a lease, with [sqltext.CarrierReleaseFrom], and tried again as
// [Lease.reclaimElsewhere] tries, until ctx ends or [reclaimFromWithin]
// has passed. Behind a transaction pooler, an answer that came just too
// late left the carrier's backend in the pooler's pool, holding its locks
// and bearing its mark.
func (c *carrier) reclaimFrom(ctx context.Context) {
	_ = retryWithin(ctx, reclaimFromWithin, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), max(c.m.interval, reclaimTimeout))
		defer cancel()
		s, err := c.m.src.OpenSession(ctx)
		if err != nil {
			return err
		}
		defer s.Close()
		if _, err := run(ctx, s, sqltext.CarrierReleaseFrom(c.pid, c.mark)); err != nil {
			s.Discard()
			return err
		}
		return nil
	})
}

// watch runs the heartbeat until the carrier is lost or closed. After a
// loss it discards the session, once the statement in flight has returned.
func (c *carrier) watch() {
	defer close(c.done)
	t := time.NewTimer(c.m.interval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-c.dead:
			c.teardown()
			return
		case <-t.C:
		}
		c.beat()
		t.Reset(c.m.interval)
	}
}

// CountEvery is how often, in beats, a heartbeat reads pg_locks to prove
// each lock: a carrier's counts the locks its session holds
// ([sqltext.CarrierCount]), a lease's finds its lock ([sqltext.Holds]).
// The beats between prove the session and its mark alone
// ([sqltext.CarrierAlive], [sqltext.Alive]), which costs the server the
// same at any number of locks on it. A lease's first beat reads pg_locks,
// and so does the first carrier's of a Mux; the carriers of a Mux take
// turns (see carrier.beat).
const CountEvery = 12

// beat proves the carrier with one round trip. Every CountEvery beats it
// counts the locks the session holds: only when some are missing does a
// second statement find which, and only their leases are lost, once the
// turn is given back. The k-th carrier a Mux opens counts at its beats
// CountEvery-k, 2·CountEvery-k and so on (mod CountEvery; the first at
// its first beat): each count copies the server's whole lock table, so
// the carriers of a Mux that holds many keys on many of them, opened
// together, take turns rather than copy it all at once. The beats between prove that the session is the
// carrier's own and bears its mark, which is what a live session needs to
// keep its locks: reading pg_locks copies the whole server's lock table,
// under every partition's lock, at a cost that grows with every lock on
// the server (docs/locker.md).
func (c *carrier) beat() {
	if c.take(context.Background()) != nil {
		return
	}
	c.m.mu.Lock()
	count := (c.beats+c.phase)%CountEvery == 0
	c.m.mu.Unlock()
	stmt := sqltext.CarrierAlive(c.pid, c.mark)
	if count {
		stmt = sqltext.CarrierCount(c.pid, c.mark)
	}
	var n int
	err := c.run(func(ctx context.Context) error {
		return c.s.QueryRow(ctx, stmt).Scan(&n)
	})
	c.m.mu.Lock()
	c.beats++
	c.m.mu.Unlock()
	var lost []*MuxLease
	switch {
	case err == nil && n < 0:
		c.lose(FailKind("heartbeat", "", ErrSharedSession, errElsewhere))
	case err != nil:
		c.lose(fmt.Errorf("heartbeat: %w", err))
	case !count && n == 0:
		c.lose(errors.New("heartbeat: the session no longer bears its mark"))
	case !count:
	case n == 0 && len(c.locks) > 0:
		c.lose(errors.New("heartbeat: the session no longer holds its locks"))
	case n < len(c.locks):
		lost = c.findMissing()
	}
	// Settled before the turn is given back, so that a Release waiting
	// for it reads the loss; announced after.
	cause := errors.New("heartbeat: the session no longer holds the lock")
	lost = slices.DeleteFunc(lost, func(l *MuxLease) bool { return !l.settleLost(cause) })
	c.give()
	for _, l := range lost {
		l.notifyLost(cause)
	}
}

// findMissing finds which locks the session no longer holds, forgets the
// leases on them, and returns those leases. The caller holds the turn.
func (c *carrier) findMissing() []*MuxLease {
	held := map[lockID]bool{}
	err := c.run(func(ctx context.Context) error {
		rows, err := c.s.Query(ctx, sqltext.CarrierHeld(c.pid, c.mark))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var classid, objid int64
			var objsubid int
			var shared bool
			if err := rows.Scan(&classid, &objid, &objsubid, &shared); err != nil {
				return err
			}
			held[lockID{sqltext.KeyFromTag(classid, objid, objsubid), shared}] = true
		}
		return rows.Err()
	})
	if err != nil {
		c.lose(fmt.Errorf("heartbeat: %w", err))
		return nil
	}
	var missing []*MuxLease
	c.m.mu.Lock()
	for l := range c.leases {
		if !held[lockID{l.key, l.shared}] {
			missing = append(missing, l)
		}
	}
	c.m.mu.Unlock()
	var lost []*MuxLease
	for _, l := range missing {
		if c.drop(l) {
			c.m.unreserve(l.key)
			lost = append(lost, l)
		}
	}
	return lost
}

// reclaim undoes the locks and mark of a lost carrier on its backend,
// with one statement ([sqltext.CarrierRelease]): it releases them if it
// lands on the carrier's backend, and ends that backend if a transaction
// pooler routes it to another. On a direct connection the session ends
// with its connection anyway, and on a dead one the statement fails at
// once. The caller holds the turn; the carrier's leases are lost already.
func (c *carrier) reclaim() error {
	ctx, cancel := context.WithTimeout(context.Background(), max(c.m.interval, reclaimTimeout))
	defer cancel()
	_, err := run(ctx, c.s, sqltext.CarrierRelease(c.pid, c.mark))
	return err
}

// close releases every lock on the carrier with one statement and
// returns its session to the pool, for Mux.Close; its leases end as
// released. Once the release starts, close keeps the turn, so that
// nothing more is sent on the session. When ctx ends first or the
// statement fails, the session is closed instead, which releases the
// locks as well; only ctx's error is reported.
func (c *carrier) close(ctx context.Context) error {
	c.stopOnce.Do(func() { close(c.stop) })
	<-c.done
	if err := c.take(ctx); err != nil {
		// Lost already, or ctx ended while a statement was in flight.
		c.end(errLockerClosed, false)
		go c.teardown()
		return ctx.Err()
	}
	var n int64
	err := c.run(func(ctx context.Context) (err error) {
		n, err = run(ctx, c.s, sqltext.CarrierRelease(c.pid, c.mark))
		return err
	})
	ended := c.end(errLockerClosed, false)
	c.downOnce.Do(func() {
		// Only a session that released its locks and mark goes back to
		// the pool; one whose backend was ended, or that was not the
		// carrier's, is closed.
		if err != nil || !ended || n != 1 {
			c.s.Discard()
		}
		c.s.Close()
		if err != nil {
			// The release may have run just too late, or not at all,
			// or failed on a backend that another client's end was
			// ending: undo it from elsewhere, as after a heartbeat's,
			// for as long as ctx lets it.
			c.reclaimFrom(ctx)
		}
	})
	if err != nil {
		return ctx.Err()
	}
	return nil
}
