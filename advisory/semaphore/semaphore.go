package semaphore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/scope"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// An Option configures a [Semaphore].
type Option func(*options)

type options struct {
	heartbeat time.Duration
	fencing   bool
	recheck   time.Duration
	rang      func(woken int64, err error) // for tests: called after each ring
	trace     func(event string)           // for tests: called at each step of a wait or a ring
}

// tracef reports a step to the test's trace, if any.
func (s *Semaphore) tracef(format string, args ...any) {
	if s.o.trace != nil {
		s.o.trace(fmt.Sprintf(format, args...))
	}
}

// Heartbeat sets the interval of each slot's lease heartbeat, as
// [advisory.Heartbeat] says. The default is 5 seconds. d must be at least
// a millisecond; of several Heartbeat options, the last one counts.
func Heartbeat(d time.Duration) Option {
	return func(o *options) { o.heartbeat = d }
}

// Fencing makes each slot's lease carry a fencing token, as
// [advisory.Fencing] says. Tokens are counted per database, not per slot.
func Fencing() Option { return func(o *options) { o.fencing = true } }

// Recheck sets the bound of each statement of a wait, after which
// [Semaphore.Acquire] tries every slot again. A waiter is woken at once
// when a slot frees (see the package documentation); the recheck finds a
// slot that freed without a wake, as when the holder's process died. The
// default, 1 second, is also the most: it is the bound on the snapshot
// that a statement holds ([advisory.WaitSlice]), and a longer d waits in
// statements of a second. Each waiter sends one statement per recheck. A
// shorter d polls the server more often. d must be at least a
// millisecond and at most math.MaxInt32 milliseconds; of several Recheck
// options, the last one counts.
func Recheck(d time.Duration) Option {
	return func(o *options) { o.recheck = d }
}

// maxSlots bounds n: every slot is one lock in the server's lock table
// while it is held.
const maxSlots = 1 << 16

// A Semaphore admits at most n holders at once, across every process
// that uses the same base key and n on the same database. It is safe for
// concurrent use.
type Semaphore struct {
	db       *sql.DB
	base     advisory.Key
	n        int
	o        options
	lease    advisory.WatchConfig // how a lease on a slot is watched
	ringStmt sqltext.Stmt         // the statement that wakes waiters
	err      error
	next     atomic.Uint32
	rings    atomic.Int64 // rings asked for and not yet run: see ring
}

// New returns the semaphore whose n slots are the n keys from base, as the
// package documentation lays them out. It checks nothing on the server.
// Bad arguments (a nil db, n out of 1..65536, a bigint base whose slots
// would pass the largest bigint, an option out of range) are reported by
// every acquisition; an option's error matches [advisory.ErrBadOption].
func New(db *sql.DB, base advisory.Key, n int, opts ...Option) *Semaphore {
	s := &Semaphore{db: db, base: base, n: n, o: options{heartbeat: scope.DefaultHeartbeat, recheck: scope.DefaultSlice}}
	for _, opt := range opts {
		if opt != nil {
			opt(&s.o)
		}
	}
	v, isInt := base.Int64()
	switch {
	case s.o.heartbeat < time.Millisecond:
		s.err = fmt.Errorf("semaphore: %w: Heartbeat(%v) must be at least a millisecond", advisory.ErrBadOption, s.o.heartbeat)
	case s.o.recheck < time.Millisecond || s.o.recheck > math.MaxInt32*time.Millisecond:
		// Recheck's range is that of lock_timeout.
		s.err = fmt.Errorf("semaphore: %w: Recheck(%v): want 1 to %d ms", advisory.ErrBadOption, s.o.recheck, math.MaxInt32)
	case db == nil:
		s.err = errors.New("semaphore: nil *sql.DB")
	case n < 1 || n > maxSlots:
		s.err = fmt.Errorf("semaphore: %d slots: want 1 to %d", n, maxSlots)
	case isInt && v > math.MaxInt64-int64(n-1):
		s.err = fmt.Errorf("semaphore: base key %s: its %d slots would pass the largest bigint", base, n)
	}
	s.lease = advisory.WatchConfig{Heartbeat: s.o.heartbeat, Fencing: s.o.fencing}
	if s.err == nil {
		s.ringStmt = sqltext.SlotRing(scope.DBForm(db), sqltext.KeyOf(base), n)
	}
	s.next.Store(rand.Uint32())
	return s
}

// N returns the number of slots.
func (s *Semaphore) N() int { return s.n }

// Slot returns the key of slot i, for i in 0..N()-1.
func (s *Semaphore) Slot(i int) advisory.Key {
	if a, b, ok := s.base.Pair(); ok {
		return advisory.PairKey(a, int32(uint32(b)+uint32(i)))
	}
	v, _ := s.base.Int64()
	return advisory.Int64Key(v + int64(i))
}

// TryAcquire takes a free slot and returns the lease that holds it, or
// an error matching [advisory.ErrNotAcquired] when every slot is taken.
// It costs a connection from db and two round trips: one tries every
// slot, one confirms the slot as a lease. ctx bounds the acquisition
// only. On any error nothing is held. When the lease ends, the semaphore
// wakes a waiter for the slot, as the package documentation says.
func (s *Semaphore) TryAcquire(ctx context.Context) (*advisory.Lease, error) {
	if s.err != nil {
		return nil, s.err
	}
	for try := 1; ; try++ {
		l, err := s.tryOnce(ctx)
		if err == nil || !retryable(err) || try == badConnTries || ctx.Err() != nil {
			return l, err
		}
	}
}

// retryable reports whether err, from a try or a wait, leaves nothing held
// and calls for another try on a fresh connection. driver.ErrBadConn
// (or sql.ErrConnDone on a kept connection) means the session died: the
// pool handed over one that had died while idle, and the driver sent
// nothing, or the session that took a slot ended before the lease
// confirmed it, and the slot went with it. SQLSTATE 57014 while ctx is
// live is a wake meant for a wait that had just ended (see ring), which
// cancelled the statement after it; the session was discarded. Either
// way take another, as database/sql does for its own statements.
func retryable(err error) bool {
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) || scope.SQLState(err) == "57014"
}

// tryOnce is one try of the slots, on a connection of its own.
func (s *Semaphore) tryOnce(ctx context.Context) (*advisory.Lease, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("semaphore: %w", scope.Fail(ctx, "connect", s.base.String(), err))
	}
	l, kept, err := s.try(ctx, conn, 0)
	if errors.Is(err, errWoken) {
		// A stray wake, meant for a wait that this session ran before
		// the pool handed it over: the try may have taken a slot.
		scope.Discard(conn)
	}
	if kept {
		_ = conn.Close() // the statement took nothing, or was discarded
	}
	return l, err
}

// try tries every slot once on conn, from the next slot round-robin
// ([sqltext.SlotTry]), or with ms above 0 waits, in the same statement,
// up to ms for the first of them when none is free ([sqltext.SlotWait]). kept reports that conn is still the
// caller's, holding nothing: when no slot was free, or the wait ran out
// (an error matching [advisory.ErrNotAcquired] or [advisory.ErrLockTimeout]),
// or a refusal took nothing. Otherwise conn is closed, or is the lease's.
// A cancel of the server's, as a ring sends, ends the wait with an error
// matching [errWoken], and conn kept: the session may hold the slot that
// the statement took as the cancel landed, which the next waiting try
// releases first.
func (s *Semaphore) try(ctx context.Context, conn *sql.Conn, ms int64) (l *advisory.Lease, kept bool, err error) {
	order := make([]advisory.Key, s.n)
	start := int(s.next.Add(1) % uint32(s.n))
	for i := range order {
		order[i] = s.Slot((start + i) % s.n)
	}
	var o int64
	// conn is a session of the semaphore's own, on which no lease of the
	// caller's runs: it must bear no mark, whatever ctx.
	stmt := sqltext.SlotTry(scope.ConnForm(conn), sqltext.KeysOf(order))
	if ms > 0 {
		stmt = sqltext.SlotWait(scope.ConnForm(conn), sqltext.KeysOf(order), ms)
		var restored string
		err = conn.QueryRowContext(ctx, stmt.Query, stmt.Args...).Scan(&restored, &o)
	} else {
		err = conn.QueryRowContext(ctx, stmt.Query, stmt.Args...).Scan(&o)
	}
	if err == nil && ctx.Err() != nil {
		// A driver can report success for a statement whose context
		// expired as it ended, after it dropped the session.
		err = ctx.Err()
	}
	switch {
	case err == nil && o == sqltext.SlotBusy:
		return nil, true, fmt.Errorf("semaphore: all %d slots of %s are taken: %w", s.n, s.base, advisory.ErrNotAcquired)
	case err == nil && o == sqltext.SlotStandby:
		return nil, true, fmt.Errorf("semaphore: %w", scope.FailKind("try the slots", s.base.String(), scope.ErrStandby, nil))
	case err == nil && o == sqltext.SlotShared:
		return nil, true, fmt.Errorf("semaphore: %w", scope.FailKind("try the slots", s.base.String(), scope.ErrSharedSession, errMarked))
	case err != nil && ctx.Err() == nil && scope.SQLState(err) == "55P03":
		// The wait ran out: the statement holds nothing, and the
		// session is as it was.
		return nil, true, fmt.Errorf("semaphore: %s: slot %s not taken: %w: %w", s.base, order[0], advisory.ErrLockTimeout, err)
	case err != nil && ctx.Err() == nil && scope.SQLState(err) == "57014":
		// The server cancelled the statement: a ring woke the wait,
		// or came as the statement began. The session may hold the
		// slot that the statement took as the cancel landed.
		return nil, true, fmt.Errorf("semaphore: %s: %w: %w", s.base, errWoken, err)
	case err != nil:
		// The statement may have taken a slot before it failed: end
		// the session, and the lock with it.
		scope.Discard(conn)
		_ = conn.Close()
		return nil, false, fmt.Errorf("semaphore: %w", scope.Fail(ctx, "try the slots", s.base.String(), err))
	case o < 1 || o > int64(s.n):
		scope.Discard(conn)
		_ = conn.Close()
		return nil, false, fmt.Errorf("semaphore: %s: the server returned slot %d of %d", s.base, o, s.n)
	}
	l, err = s.watch(ctx, conn, order[o-1])
	return l, false, err
}

// errMarked is the cause of ErrSharedSession when a try found a lease's
// mark on the semaphore's own session, which no lease uses.
var errMarked = errors.New("the session bears the mark of a lease that another client holds on it")

// errWoken is the cause of a try that a cancel of the server's ended.
var errWoken = errors.New("the server cancelled the statement")

// watch turns conn's lock on slot into a lease, which rings when it ends.
func (s *Semaphore) watch(ctx context.Context, conn *sql.Conn, slot advisory.Key) (*advisory.Lease, error) {
	l, err := advisory.Watch(ctx, conn, slot, s.lease)
	if err != nil {
		return nil, fmt.Errorf("semaphore: %s: %w", s.base, err)
	}
	context.AfterFunc(l.Context(), func() { s.ring(l) })
	return l, nil
}

// Acquire takes a slot, waiting as the package documentation says until
// one is free or ctx ends, and returns the lease that holds it. The error
// matches ctx.Err() when ctx ends first. ctx bounds the acquisition only.
// On any error nothing is held. It keeps one connection from db while it
// waits.
func (s *Semaphore) Acquire(ctx context.Context) (*advisory.Lease, error) {
	if s.err != nil {
		return nil, s.err
	}
	// The waiter's session, kept from one statement to the next, so
	// that a wake (see ring) lands on a statement of the waiter's, and
	// on no other code's use of a pooled session.
	var conn *sql.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	// Each statement tries every slot and waits up to ms for one: the
	// recheck, at most the snapshot bound.
	ms := max(int64(min(s.o.recheck, scope.DefaultSlice)/time.Millisecond), 1)
	for retries := 0; ; {
		if conn == nil {
			c, err := s.db.Conn(ctx)
			if err != nil {
				return nil, fmt.Errorf("semaphore: %w", scope.Fail(ctx, "connect", s.base.String(), err))
			}
			conn = c
			s.tracef("connected")
		}
		l, kept, err := s.try(ctx, conn, ms)
		s.tracef("tried: %v", err)
		if !kept {
			conn = nil
		}
		switch {
		case err == nil:
			return l, nil
		case ctx.Err() != nil:
			if conn != nil && errors.Is(err, errWoken) {
				scope.Discard(conn) // it may hold the slot
			}
			return nil, fmt.Errorf("semaphore: %s: %w", s.base, ctx.Err())
		case errors.Is(err, advisory.ErrLockTimeout), errors.Is(err, errWoken):
			// The wait's bound ran out, or a ring woke it: try every
			// slot again at once, having released the slot that the
			// statement may have taken as the cancel landed.
			retries = 0
		case retryable(err) && retries < badConnTries:
			retries++
		default:
			return nil, err
		}
	}
}
