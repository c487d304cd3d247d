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

// The defaults of the options, those of advisory: a lease's heartbeat
// ([advisory.Heartbeat]), and the longest statement of a wait, the bound
// on the snapshot it holds ([advisory.WaitSlice]), which is also the
// longest wait [advisory.LockAnyWithin] takes.
const (
	defaultHeartbeat = 5 * time.Second
	defaultSlice     = time.Second
)

// A Semaphore admits at most n holders at once, across every process
// that uses the same base key and n on the same database. It is safe for
// concurrent use.
type Semaphore struct {
	db    *sql.DB
	base  advisory.Key
	n     int
	o     options
	lease advisory.WatchConfig // how a lease on a slot is watched
	err   error
	next  atomic.Uint32
	rings atomic.Int64 // rings asked for and not yet run: see ring
}

// New returns the semaphore whose n slots are the n keys from base, as the
// package documentation lays them out. It checks nothing on the server.
// Bad arguments (a nil db, n out of 1..65536, a bigint base whose slots
// would pass the largest bigint, an option out of range) are reported by
// every acquisition; an option's error matches [advisory.ErrBadOption].
func New(db *sql.DB, base advisory.Key, n int, opts ...Option) *Semaphore {
	s := &Semaphore{db: db, base: base, n: n, o: options{heartbeat: defaultHeartbeat, recheck: defaultSlice}}
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
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) || sqlState(err) == "57014"
}

// sqlState returns the SQLSTATE of the first error in err's tree that
// carries one, whatever the driver, or "".
func sqlState(err error) string {
	var e interface{ SQLState() string }
	if errors.As(err, &e) {
		return e.SQLState()
	}
	return ""
}

// connect takes a connection from s's db, for op.
func (s *Semaphore) connect(ctx context.Context) (*sql.Conn, error) {
	conn, err := s.db.Conn(ctx)
	switch {
	case err == nil:
		return conn, nil
	case ctx.Err() != nil && !errors.Is(err, ctx.Err()):
		return nil, fmt.Errorf("semaphore: %s: connect: %w: %w", s.base, ctx.Err(), err)
	}
	return nil, fmt.Errorf("semaphore: %s: connect: %w", s.base, err)
}

// tryOnce is one try of the slots, on a connection of its own.
func (s *Semaphore) tryOnce(ctx context.Context) (*advisory.Lease, error) {
	conn, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	l, kept, err := s.try(ctx, conn, 0)
	if kept {
		_ = conn.Close() // the statement took nothing
	}
	return l, err
}

// try tries every slot once on conn, from the next slot round-robin
// ([advisory.TryLockAny]), or with ms above 0 waits, in the same
// statement, up to ms for the first of them when none is free
// ([advisory.LockAnyWithin]). kept reports that conn is still the
// caller's, holding nothing: when no slot was free, or the wait ran out
// (an error matching [advisory.ErrNotAcquired] or
// [advisory.ErrLockTimeout]), or a refusal took nothing. Otherwise conn
// is closed, or is the lease's. A cancel of the server's, as a ring
// sends, ends a wait with an error matching [errWoken], and conn kept:
// the session may hold the slot that the statement took as the cancel
// landed, which the next waiting try releases first. A try that such a
// cancel ends (a stray wake, meant for a wait that the session ran before
// the pool handed it over) closes the session, as any failed try does.
func (s *Semaphore) try(ctx context.Context, conn *sql.Conn, ms int64) (l *advisory.Lease, kept bool, err error) {
	order := make([]advisory.Key, s.n)
	start := int(s.next.Add(1) % uint32(s.n))
	for i := range order {
		order[i] = s.Slot((start + i) % s.n)
	}
	// conn is a session of the semaphore's own, on which no lease of the
	// caller's runs: the calls refuse it if it bears a mark, whatever ctx.
	var slot advisory.Key
	took := true
	if ms > 0 {
		slot, err = advisory.LockAnyWithin(ctx, conn, time.Duration(ms)*time.Millisecond, order...)
	} else {
		slot, took, err = advisory.TryLockAny(ctx, conn, order...)
	}
	switch {
	case err == nil && !took:
		return nil, true, fmt.Errorf("semaphore: all %d slots of %s are taken: %w", s.n, s.base, advisory.ErrNotAcquired)
	case errors.Is(err, advisory.ErrStandby), errors.Is(err, advisory.ErrSharedSession):
		// A refusal takes nothing, and keeps the session.
		return nil, true, fmt.Errorf("semaphore: %s: %w", s.base, err)
	case err != nil && ms > 0 && ctx.Err() == nil && sqlState(err) == "55P03":
		// The wait ran out: the statement holds nothing, and the
		// session is as it was.
		return nil, true, fmt.Errorf("semaphore: %s: slot %s not taken: %w", s.base, order[0], err)
	case err != nil && ms > 0 && ctx.Err() == nil && sqlState(err) == "57014":
		// The server cancelled the statement: a ring woke the wait,
		// or came as the statement began. The session may hold the
		// slot that the statement took as the cancel landed.
		return nil, true, fmt.Errorf("semaphore: %s: %w: %w", s.base, errWoken, err)
	case err != nil && ctx.Err() == nil && sqlState(err) == "57014":
		// A stray wake ended a try, which closed the session.
		_ = conn.Close()
		return nil, false, fmt.Errorf("semaphore: %s: %w: %w", s.base, errWoken, err)
	case err != nil:
		// The call closed the session, and any slot it took with it.
		_ = conn.Close()
		return nil, false, fmt.Errorf("semaphore: %s: %w", s.base, err)
	}
	l, err = s.watch(ctx, conn, slot)
	return l, false, err
}

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
	ms := max(int64(min(s.o.recheck, defaultSlice)/time.Millisecond), 1)
	for retries := 0; ; {
		if conn == nil {
			c, err := s.connect(ctx)
			if err != nil {
				return nil, err
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
				// It may hold the slot: release it, or end the
				// session if that fails.
				_ = advisory.UnlockAll(ctx, conn)
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
