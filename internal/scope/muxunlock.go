package scope

import (
	"context"
	"fmt"
	"slices"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// maxUnlockBatch bounds how many releases one statement on a carrier
// carries; more wait for the next.
const maxUnlockBatch = 500

// An unlockReq is a release waiting for its carrier: the lease, and done,
// closed once the lease is settled and its hold in the Mux ended.
type unlockReq struct {
	l    *MuxLease
	done chan struct{}
}

// release releases l's lock on its carrier. Releases that arrive while a
// statement is in flight on the carrier queue, and whichever of them
// takes the turn next sends them all in one statement
// ([sqltext.CarrierUnlockBatch]); a lone release sends
// [sqltext.CarrierUnlock]. It returns once l is settled: released, or
// lost when the carrier was lost first or its key was not held.
func (c *carrier) release(l *MuxLease) {
	r := &unlockReq{l: l, done: make(chan struct{})}
	c.qmu.Lock()
	c.queued = append(c.queued, r)
	c.qmu.Unlock()
	for {
		select {
		case <-r.done:
			return
		case <-c.dead:
			c.abandon(r)
			return
		case c.turn <- struct{}{}:
		}
		select {
		case <-c.dead:
			c.give()
			c.abandon(r)
			return
		default:
		}
		c.sendQueued()
		c.give()
	}
}

// abandon ends r's wait on a carrier that was lost or closed. A release
// still queued is settled already: every lease on the carrier is, before
// the carrier is seen to be dead. One that another release took into its
// statement is settled by that release, which abandon waits for.
func (c *carrier) abandon(r *unlockReq) {
	c.qmu.Lock()
	i := slices.Index(c.queued, r)
	if i >= 0 {
		c.queued = slices.Delete(c.queued, i, i+1)
	}
	c.qmu.Unlock()
	if i < 0 {
		<-r.done
	}
}

// sendQueued sends the releases queued on the carrier, up to
// maxUnlockBatch, in one statement, and settles each. The caller holds
// the turn.
func (c *carrier) sendQueued() {
	c.qmu.Lock()
	n := min(len(c.queued), maxUnlockBatch)
	batch := append([]*unlockReq(nil), c.queued[:n]...)
	c.queued = append(c.queued[:0], c.queued[n:]...)
	c.qmu.Unlock()
	var send []*MuxLease
	for _, r := range batch {
		if c.drop(r.l) {
			send = append(send, r.l)
		}
	}
	// A lease the carrier no longer knew was lost, or ended by Close,
	// before the turn came.
	errs := c.unlockMany(send)
	for i, l := range send {
		if errs[i] != nil {
			l.lose(errs[i])
		} else {
			l.end(errReleased)
		}
		c.m.unreserve(l.key)
	}
	for _, r := range batch {
		close(r.done)
	}
}

// unlockMany releases one hold of each lease's key on the carrier, with
// one statement, and returns each one's error. The caller holds the
// turn. A failure, or a key the session did not hold, loses the carrier,
// as [carrier.unlock] does: the leases whose keys were released end as
// released, the others are lost.
func (c *carrier) unlockMany(ls []*MuxLease) []error {
	errs := make([]error, len(ls))
	switch len(ls) {
	case 0:
		return errs
	case 1:
		errs[0] = c.unlock(ls[0].key, ls[0].shared)
		return errs
	}
	keys := make([]sqltext.Key, len(ls))
	shared := make([]bool, len(ls))
	for i, l := range ls {
		keys[i], shared[i] = l.key, l.shared
	}
	stmt := sqltext.CarrierUnlockBatch(c.m.form, c.pid, c.mark, keys, shared)
	answers := make([]int64, len(ls))
	err := c.run(func(ctx context.Context) error {
		rows, err := c.s.Query(ctx, stmt.Query, stmt.Args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var i, n int64
			if err := rows.Scan(&i, &n); err != nil {
				return err
			}
			if i >= 1 && i <= int64(len(ls)) {
				answers[i-1] = n
			}
		}
		return rows.Err()
	})
	var lost error
	for i, n := range answers {
		switch {
		case err != nil:
			errs[i] = err
		case n == sqltext.HoldsElsewhere:
			errs[i] = FailKind("unlock", keys[i].String(), ErrSharedSession, errElsewhere)
		case n != 1:
			errs[i] = FailKind("unlock", keys[i].String(), ErrNotHeld, nil)
		}
		if errs[i] != nil && lost == nil {
			lost = errs[i]
		}
	}
	if lost != nil {
		c.lose(lost)
		for i := range errs {
			if errs[i] != nil {
				errs[i] = fmt.Errorf("%w: %w", errCarrierLost, errs[i])
			}
		}
	}
	return errs
}
