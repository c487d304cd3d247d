package scope

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// DefaultMaxConns is how many connections a Mux holds leases on when
// MaxConns is not given.
const DefaultMaxConns = 4

// KeysPerCarrier is how many keys a carrier holds, by default, before a
// Mux opens another for new keys, within its max. Every statement on a session
// costs more the more locks the session holds: at the end of each
// transaction the server walks the session's local lock table, about
// 0.07 µs a lock. At 1,000 that adds a tenth or so to a try
// (docs/locker.md); beyond it the cost per key grows with the keys held.
const KeysPerCarrier = 1000

// spreadCarriers is how many carriers a Mux opens, within its max, as soon
// as each of those open holds a lease, so that a few leases already spread
// their statements over several sessions, and how many with room for new
// keys it keeps: beyond it a Mux opens another only as carriers fill (see
// route).
const spreadCarriers = DefaultMaxConns

// BadConnTries bounds how often a statement that found its pooled
// connection dead is tried on another, as database/sql does for its own.
const BadConnTries = 5

// errLockerClosed is the cause of a Mux's leases' contexts after Close,
// and the error of an acquisition that Close overtook.
var errLockerClosed = errors.New("advisory: locker closed")

// errBound is the cause of an acquisition's context when its Wait ran
// out.
var errBound = errors.New("advisory: the acquisition's Wait ran out")

// ErrLockerClosed is returned by an acquisition on a closed Mux.
var ErrLockerClosed = errLockerClosed

// A Mux holds many leases on a few connections, its carriers: at most max
// of them hold leases, each proved by one heartbeat. A key held by one of
// its leases is arbitrated in the process: a second acquisition that
// conflicts with it waits for it, or gives up, without a round trip, since
// on one session the server would let it stack instead. Every session it
// uses comes from its [MuxSource], and every statement goes through the
// seam (seam.go).
type Mux struct {
	src      MuxSource
	form     sqltext.Form // how its statements carry their keys: src's
	max      int
	per      int // keys a carrier holds before another opens: KeysPerCarrier
	interval time.Duration
	hooks    Hooks // the Mux's own, or nil for the default

	mu       sync.Mutex
	carriers []*carrier
	opening  int                       // carriers being opened
	opened   int64                     // carriers ever opened: see carrier.phase
	changed  chan struct{}             // closed and replaced when carriers change
	held     map[sqltext.Key]*keyHolds // keys held or being taken
	closed   bool

	closing context.Context    // ends when Close starts: waits end with it
	close   context.CancelFunc // ends closing
	openers sync.WaitGroup     // carriers being opened; Close waits for them
}

// keyHolds are a process's holds on one key: the leases on it and the
// acquisitions in flight.
type keyHolds struct {
	shared bool
	n      int
	free   chan struct{} // closed when n drops to 0
}

// NewMux returns a Mux that holds leases on at most max sessions from
// src, each with a heartbeat every interval, opening another for new keys
// once each holds per keys (0 is KeysPerCarrier). The database/sql front
// passes [DBSource] of its *sql.DB.
func NewMux(src MuxSource, max, per int, interval time.Duration, hooks Hooks) *Mux {
	closing, close := context.WithCancel(context.Background())
	if per <= 0 {
		per = KeysPerCarrier
	}
	return &Mux{src: src, form: src.Form(), max: max, per: per, interval: interval, hooks: hooks,
		changed: make(chan struct{}), held: map[sqltext.Key]*keyHolds{},
		closing: closing, close: close}
}

// observed returns the hooks of an acquisition made with o.
func (m *Mux) observed(o *Options) Hooks {
	if o.Hooks != nil {
		return o.Hooks
	}
	if m.hooks != nil {
		return m.hooks
	}
	return DefaultHooks()
}

// Acquire takes key as o says (Try, Timeout, Shared, Fencing) on one of
// the Mux's carriers, and returns its lease. A try costs one round trip
// on a carrier. A wait first tries, and when the key is busy waits for it
// on a connection of its own, which then lets the key go so that a
// carrier can take it; if another session takes it first, the wait
// starts again.
func (m *Mux) Acquire(ctx context.Context, key sqltext.Key, o *Options) (*MuxLease, error) {
	op := o.LockOp(false)
	h := m.observed(o)
	start := now(h)
	l, err := m.acquire(ctx, key, o, op, h)
	if h != nil {
		busy := errors.Is(err, ErrNotAcquired)
		var herr error
		if !busy {
			herr = err
		}
		h.Acquired(ctx, op, []sqltext.Key{key}, since(h, start), err == nil, herr)
	}
	return l, err
}

func (m *Mux) acquire(ctx context.Context, key sqltext.Key, o *Options, op string, h Hooks) (l *MuxLease, err error) {
	if err := checkPool(ctx, m.src, false, op, key.String()); err != nil {
		return nil, err
	}
	var deadline time.Time
	if o.Bounded {
		// Timeout bounds the whole acquisition: the turn on a
		// connection, a connection from the pool, and the wait.
		deadline = time.Now().Add(o.Timeout)
		parent := ctx
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadlineCause(ctx, deadline, errBound)
		defer cancel()
		defer func() {
			if err != nil && parent.Err() == nil && context.Cause(ctx) == errBound && !errors.Is(err, ErrLockTimeout) {
				err = FailKind(op, key.String(), ErrLockTimeout, nil)
			}
		}()
	}
	if err := m.reserve(ctx, key, o, op, deadline); err != nil {
		return nil, err
	}
	for lostCarriers := 0; ; {
		c, err := m.carrier(ctx)
		if err != nil {
			m.unreserve(key)
			return nil, err
		}
		l, err := c.try(ctx, key, o, op, h)
		m.routed(c)
		switch {
		case l != nil:
			return l, nil
		case err == nil && o.Try:
			err = FailKind(op, key.String(), ErrNotAcquired, nil)
		case err == nil:
			// Busy: wait for the key elsewhere, then try again.
			err = m.await(ctx, key, o, op, deadline)
		case errors.Is(err, errCarrierLost) && ctx.Err() != nil:
			err = Fail(ctx, op, key.String(), ctx.Err())
		case errors.Is(err, errCarrierLost):
			// The carrier was lost before the statement or under it;
			// nothing was taken. Take another.
			if errors.Is(err, ErrSharedSession) {
				err = FailKind("lease", key.String(), ErrSharedSession, nil)
			} else if lostCarriers++; lostCarriers < BadConnTries {
				err = nil
			} else {
				err = FailKind(op, key.String(), ErrLockLost, err)
			}
		}
		if err != nil {
			m.unreserve(key)
			return nil, err
		}
	}
}

// reserve records an acquisition of key in flight, after waiting, unless
// o says Try, for a conflicting hold of the process's own to end.
func (m *Mux) reserve(ctx context.Context, key sqltext.Key, o *Options, op string, deadline time.Time) error {
	var timer <-chan time.Time
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return FailKind(op, key.String(), ErrLockerClosed, nil)
		}
		k := m.held[key]
		if k == nil {
			m.held[key] = &keyHolds{shared: o.Shared, n: 1, free: make(chan struct{})}
			m.mu.Unlock()
			return nil
		}
		if k.shared && o.Shared {
			k.n++
			m.mu.Unlock()
			return nil
		}
		free := k.free
		m.mu.Unlock()
		if o.Try {
			return FailKind(op, key.String(), ErrNotAcquired, nil)
		}
		if timer == nil && !deadline.IsZero() {
			t := time.NewTimer(time.Until(deadline))
			defer t.Stop()
			timer = t.C
		}
		select {
		case <-free:
		case <-m.closing.Done():
			return FailKind(op, key.String(), ErrLockerClosed, nil)
		case <-timer:
			return FailKind(op, key.String(), ErrLockTimeout, nil)
		case <-ctx.Done():
			return Fail(ctx, op, key.String(), ctx.Err())
		}
	}
}

// unreserve ends a hold of key.
func (m *Mux) unreserve(key sqltext.Key) {
	m.mu.Lock()
	m.unreserveLocked(key)
	m.mu.Unlock()
}

func (m *Mux) unreserveLocked(key sqltext.Key) {
	k := m.held[key]
	if k.n--; k.n == 0 {
		delete(m.held, key)
		close(k.free)
	}
}

// carrier returns the carrier with the fewest acquisitions under way, and
// of those the one with the fewest leases, opening another first when
// route says so: while there are fewer than max, and each is full, or
// each of the few with room is busy, or each of the first few holds a
// lease. The caller calls m.routed(c) when its statement on c is done.
func (m *Mux) carrier(ctx context.Context) (*carrier, error) {
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return nil, FailKind("lease", "", ErrLockerClosed, nil)
		}
		i, open := route(len(m.carriers), func(i int) carrierLoad {
			return carrierLoad{pending: m.carriers[i].pending, leases: len(m.carriers[i].leases)}
		}, m.opening, m.max, m.per)
		var best *carrier
		if i >= 0 {
			best = m.carriers[i]
		}
		if open {
			m.opening++
			m.openers.Add(1) // under mu, so that a Close after it waits for it
			m.mu.Unlock()
			return m.open(ctx)
		}
		if best != nil {
			best.pending++
			m.mu.Unlock()
			return best, nil
		}
		changed := m.changed
		m.mu.Unlock()
		// The carriers it would take are being opened by other
		// acquisitions.
		select {
		case <-changed:
		case <-m.closing.Done():
			return nil, FailKind("lease", "", ErrLockerClosed, nil)
		case <-ctx.Done():
			return nil, Fail(ctx, "lease", "", ctx.Err())
		}
	}
}

// A carrierLoad is what route weighs of a carrier: its acquisitions
// under way and its leases.
type carrierLoad struct{ pending, leases int }

// route picks, for a new key, a carrier that holds fewer than per keys
// over one that holds more, and then the one with the fewest
// acquisitions under way and of those the one with the fewest leases. It
// reports whether to open another instead, while fewer than max are open
// or being opened: when none is open, or every one holds per keys or
// more, and fewer than spreadCarriers are being opened (with as many
// being opened, best is -1: wait for them), when fewer than
// spreadCarriers have room (counting those being opened) and each has an
// acquisition under way, or when the first spreadCarriers are not all
// open yet and each holds a lease. The carriers are load(0) to
// load(n-1); best is -1 when there is none.
//
// So new keys go to spreadCarriers carriers at a time, whatever max is:
// more would not take keys faster on a server with few cores, and keys
// taken together would scatter over many sessions, where the releases
// that come together could not go together (see [carrier.release]).
// Measured with 10,000 leases on 10 connections, 32 goroutines that each
// opened one while none was open, or whenever each was busy, spread every
// 32 keys taken together over 7 to 10 of them; at 10,000 and 30,000
// leases a release then cost 2–6 times what it costs at 1,000
// (docs/locker.md).
func route(n int, load func(i int) carrierLoad, opening, max, per int) (best int, open bool) {
	best = -1
	var b carrierLoad
	less := func(c, b carrierLoad) bool {
		if cf, bf := c.leases >= per, b.leases >= per; cf != bf {
			return bf
		}
		return c.pending < b.pending || c.pending == b.pending && c.leases < b.leases
	}
	roomy := opening
	for i := range n {
		c := load(i)
		if c.leases < per {
			roomy++
		}
		if best < 0 || less(c, b) {
			best, b = i, c
		}
	}
	switch {
	case n+opening >= max:
		return best, false
	case best < 0, b.leases >= per:
		// None is open or every one is full: open another, or wait for
		// the few being opened rather than open one per goroutine.
		if opening < spreadCarriers {
			return best, true
		}
		return -1, false
	case b.pending > 0:
		return best, roomy < spreadCarriers
	}
	return best, n+opening < spreadCarriers && b.leases > 0
}

// routed records that an acquisition that carrier returned is done with c.
func (m *Mux) routed(c *carrier) {
	m.mu.Lock()
	c.pending--
	m.mu.Unlock()
}

// removeLocked forgets a carrier that ended.
func (m *Mux) removeLocked(c *carrier) {
	for i, x := range m.carriers {
		if x == c {
			m.carriers = append(m.carriers[:i], m.carriers[i+1:]...)
			m.signalLocked()
			return
		}
	}
}

// signalLocked wakes those waiting for the carriers to change.
func (m *Mux) signalLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// await waits, on a session of its own from the Mux's source, until key
// is free in o's mode, for as long as ctx and the deadline allow. It
// waits in slices (see [waitInSlices]), each a statement that is its own
// transaction: it takes the key as a transaction lock, which ends with
// the statement, so that a slice that runs out, or one whose grant raced
// its failure, leaves nothing held. The session goes back to the pool,
// unless a statement failed otherwise: a cancel the driver sent for it
// may still be in flight.
func (m *Mux) await(ctx context.Context, key sqltext.Key, o *Options, op string, deadline time.Time) error {
	wo := *o
	if !deadline.IsZero() {
		left := time.Until(deadline)
		if left <= 0 {
			return FailKind(op, key.String(), ErrLockTimeout, nil)
		}
		wo.Bounded, wo.Timeout = true, left
	}
	// Close ends the wait.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(m.closing, func() { cancel(errLockerClosed) })()
	start := time.Now()
	var err error
	for try := 1; try <= BadConnTries; try++ {
		var s ScopeSession
		if s, err = m.src.OpenSession(ctx); err != nil {
			return Fail(ctx, "connect", key.String(), err)
		}
		w := waitInSlices(ctx, start, &wo, op, key.String(), true,
			func(ctx context.Context) (waitSettings, error) { return readWaitSettings(ctx, s) },
			func(ctx context.Context, _ int, ms int64, _ waitSettings) error {
				stmt := sqltext.XactSliceStmt(m.form, o.Shared, ms, key)
				_, err := run(ctx, s, stmt.Query, stmt.Args...)
				return err
			})
		if w.doubt {
			s.Discard()
		}
		s.Close()
		if err = w.err; err == nil || !w.doubt || !retryable(ctx, err) {
			break
		}
	}
	if err != nil && context.Cause(ctx) == errLockerClosed {
		return FailKind(op, key.String(), ErrLockerClosed, nil)
	}
	return err
}

// Close releases every lease and returns the carriers' sessions to the
// pool. Later acquisitions fail with ErrLockerClosed; leases end as
// released, their contexts cancelled.
func (m *Mux) Close(ctx context.Context) error {
	m.mu.Lock()
	m.closed = true
	carriers := append([]*carrier(nil), m.carriers...)
	m.signalLocked() // acquisitions waiting for a carrier to open end
	m.mu.Unlock()
	m.close()
	m.openers.Wait() // an opening ends with closing, and closes what it opened
	var errs []error
	for _, c := range carriers {
		errs = append(errs, c.close(ctx))
	}
	return errors.Join(errs...)
}
