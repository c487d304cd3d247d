package semaphore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// ring wakes waiters after l, a lease on one of the slots, ended: one
// statement cancels the wait of as many waiters on the other slots as
// slots are free ([advisory.CancelWaiters]), and each tries every slot
// again. A waiter on l's own slot needs no wake: the server handed it the
// slot as l's unlock freed it. A released lease's context ends after its
// unlock ran, so the slot is free by then; a lost lease's session ends a
// moment after the loss, and only then frees the slot, so the ring waits
// lostRingDelay first.
//
// Rings coalesce: while one runs, the leases that end ask for one more,
// which sees them all; so a semaphore rings from one goroutine at a time,
// on one connection, back to back while its leases keep ending. Each ring
// gives up after ringTimeout, and nobody waits for it: its errors leave
// waiters to find the slot at their next recheck.
func (s *Semaphore) ring(l *advisory.Lease) {
	if errors.Is(l.Err(), advisory.ErrLockLost) {
		time.Sleep(lostRingDelay)
	}
	if s.rings.Add(1) > 1 {
		return // the goroutine that rings now rings again after
	}
	var conn *sql.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	for {
		asked := s.rings.Load() // each asked before this ring's read
		s.tracef("ring")
		woken, err := s.ringOnce(&conn)
		s.tracef("rang: %d %v", woken, err)
		if s.o.rang != nil {
			s.o.rang(woken, err)
		}
		if s.rings.Add(-asked) == 0 {
			return
		}
	}
}

// ringOnce runs the ring's statement ([advisory.CancelWaiters]) on
// *conn, taking a connection from db when it is nil, and returns the
// number of waiters it woke. A connection whose ring failed is closed,
// and its session with it ([advisory.CancelWaiters] ends it), so that a
// cancel of the driver's, still in flight, lands on no later statement.
func (s *Semaphore) ringOnce(conn **sql.Conn) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ringTimeout)
	defer cancel()
	if *conn == nil {
		c, err := s.db.Conn(ctx)
		if err != nil {
			return 0, err
		}
		*conn = c
		s.tracef("ring connected")
	}
	woken, err := advisory.CancelWaiters(ctx, *conn, s.base, s.n)
	if err != nil {
		_ = (*conn).Close()
		*conn = nil
	}
	return int64(woken), err
}

const (
	// badConnTries bounds how often a try takes a fresh connection when
	// the one it had died, or a stray wake cancelled its statement.
	badConnTries = 5
	// ringTimeout bounds one ring, from taking a connection to its
	// answer.
	ringTimeout = time.Second
	// lostRingDelay is how long a ring waits after a loss for the lost
	// session to end: a session that the client dropped usually ends
	// within tens of milliseconds.
	lostRingDelay = 100 * time.Millisecond
)
