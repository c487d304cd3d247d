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
	err       error
}

// Heartbeat sets the interval of each slot's lease heartbeat, as
// [advisory.Heartbeat] says. The default is 5 seconds.
func Heartbeat(d time.Duration) Option {
	return func(o *options) {
		if d < time.Millisecond {
			o.err = fmt.Errorf("semaphore: heartbeat %v is shorter than a millisecond", d)
		}
		o.heartbeat = d
	}
}

// Fencing makes each slot's lease carry a fencing token, as
// [advisory.Fencing] says. Tokens are counted per database, not per slot.
func Fencing() Option { return func(o *options) { o.fencing = true } }

// Recheck sets the first bound of a wait on one slot, after which
// [Semaphore.Acquire] tries every slot again; later bounds double, up to
// 32 times d. A slot that frees while nobody waits on it stays free for at
// most the current bound. The default is 250 milliseconds.
func Recheck(d time.Duration) Option {
	return func(o *options) {
		if d < time.Millisecond {
			o.err = fmt.Errorf("semaphore: recheck %v is shorter than a millisecond", d)
		}
		o.recheck = d
	}
}

// maxSlots bounds n: every slot is one lock in the server's lock table
// while it is held.
const maxSlots = 1 << 16

// A Semaphore admits at most n holders at once, across every process
// that uses the same base key and n on the same database. It is safe for
// concurrent use.
type Semaphore struct {
	db    *sql.DB
	base  advisory.Key
	n     int
	o     options
	lopts []advisory.Option
	err   error
	next  atomic.Uint32
}

// New returns the semaphore whose n slots are the n keys from base, as the
// package documentation lays them out. It checks nothing on the server.
// Bad arguments (a nil db, n out of 1..65536, a bigint base whose slots
// would pass the largest bigint) are reported by every acquisition.
func New(db *sql.DB, base advisory.Key, n int, opts ...Option) *Semaphore {
	s := &Semaphore{db: db, base: base, n: n, o: options{heartbeat: scope.DefaultHeartbeat, recheck: 250 * time.Millisecond}}
	for _, opt := range opts {
		if opt != nil {
			opt(&s.o)
		}
	}
	v, isInt := base.Int64()
	switch {
	case s.o.err != nil:
		s.err = s.o.err
	case db == nil:
		s.err = errors.New("semaphore: nil *sql.DB")
	case n < 1 || n > maxSlots:
		s.err = fmt.Errorf("semaphore: %d slots: want 1 to %d", n, maxSlots)
	case isInt && v > math.MaxInt64-int64(n-1):
		s.err = fmt.Errorf("semaphore: base key %s: its %d slots would pass the largest bigint", base, n)
	}
	s.lopts = []advisory.Option{advisory.Heartbeat(s.o.heartbeat)}
	if s.o.fencing {
		s.lopts = append(s.lopts, advisory.Fencing())
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
// only. On any error nothing is held.
func (s *Semaphore) TryAcquire(ctx context.Context) (*advisory.Lease, error) {
	if s.err != nil {
		return nil, s.err
	}
	order := make([]advisory.Key, s.n)
	start := int(s.next.Add(1) % uint32(s.n))
	for i := range order {
		order[i] = s.Slot((start + i) % s.n)
	}
	for try := 1; ; try++ {
		l, err := s.tryOnce(ctx, order)
		// driver.ErrBadConn means the session died: the pool handed
		// over one that had died while idle, and the driver sent
		// nothing, or the session that took a slot ended before the
		// lease confirmed it, and the slot went with it. Either way
		// nothing is held: take another, as database/sql does for its
		// own statements.
		if err == nil || !errors.Is(err, driver.ErrBadConn) || try == badConnTries || ctx.Err() != nil {
			return l, err
		}
	}
}

// tryOnce is one try of the slots in order, on one connection.
func (s *Semaphore) tryOnce(ctx context.Context, order []advisory.Key) (*advisory.Lease, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("semaphore: %w", scope.Fail(ctx, "connect", s.base.String(), err))
	}
	var o int
	stmt := sqltext.SlotTry(scope.ConnForm(conn), sqltext.KeysOf(order))
	err = conn.QueryRowContext(ctx, stmt.Query, stmt.Args...).Scan(&o)
	if err == nil && ctx.Err() != nil {
		// A driver can report success for a statement whose context
		// expired as it ended, after it dropped the session.
		err = ctx.Err()
	}
	switch {
	case errors.Is(err, sql.ErrNoRows):
		_ = conn.Close() // the statement took nothing
		return nil, fmt.Errorf("semaphore: all %d slots of %s are taken: %w", s.n, s.base, advisory.ErrNotAcquired)
	case err != nil:
		// The statement may have taken a slot before it failed: end
		// the session, and the lock with it.
		scope.Discard(conn)
		_ = conn.Close()
		return nil, fmt.Errorf("semaphore: %w", scope.Fail(ctx, "try the slots", s.base.String(), err))
	case o < 1 || o > s.n:
		scope.Discard(conn)
		_ = conn.Close()
		return nil, fmt.Errorf("semaphore: %s: the server returned slot %d of %d", s.base, o, s.n)
	}
	l, err := advisory.Watch(ctx, conn, order[o-1], s.lopts...)
	if err != nil {
		return nil, fmt.Errorf("semaphore: %s: %w", s.base, err)
	}
	return l, nil
}

// Acquire takes a slot, waiting as the package documentation says until
// one is free or ctx ends, and returns the lease that holds it. The error
// matches ctx.Err() when ctx ends first. ctx bounds the acquisition only.
// On any error nothing is held.
func (s *Semaphore) Acquire(ctx context.Context) (*advisory.Lease, error) {
	wait := s.o.recheck
	for {
		l, err := s.TryAcquire(ctx)
		if err == nil || !errors.Is(err, advisory.ErrNotAcquired) {
			return l, err
		}
		slot := s.Slot(int(s.next.Add(1) % uint32(s.n)))
		l, err = advisory.Acquire(ctx, s.db, slot, append([]advisory.Option{advisory.Timeout(wait)}, s.lopts...)...)
		switch {
		case err == nil:
			return l, nil
		case ctx.Err() != nil:
			return nil, fmt.Errorf("semaphore: %s: %w", s.base, ctx.Err())
		case !errors.Is(err, advisory.ErrLockTimeout):
			return nil, fmt.Errorf("semaphore: %s: %w", s.base, err)
		}
		wait = min(2*wait, 32*s.o.recheck)
	}
}

// badConnTries bounds how often a try takes a fresh connection when the
// one it had died.
const badConnTries = 5
