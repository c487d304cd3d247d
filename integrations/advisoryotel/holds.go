package advisoryotel

import (
	"container/list"
	"sync"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// A Release carries no hold time, and PostgreSQL records none: the
// observer remembers when each lock was acquired, and a release takes the
// newest acquisition of its key and mode back out (last in, first out,
// as stacked session locks are released). Acquisitions whose release the
// observer never sees (a plain XactLock's, which ends with a transaction
// this library does not see, or one released by UnlockAll) are never
// taken out: each level keeps at most limit of them, and forgets its
// oldest past that.

// holdKey is what a release names: a key, a mode and a level.
type holdKey struct {
	key    advisory.Key
	xact   bool
	shared bool
}

// hold is one acquisition that has not been released.
type hold struct {
	hk  holdKey
	at  time.Time
	seq uint64 // the order of acquisition
}

// holds remembers acquisitions of both levels until they are released.
type holds struct {
	mu    sync.Mutex
	limit int // per level; 0 remembers nothing
	seq   uint64
	// byAge holds each level's acquisitions, oldest first, as *hold, so
	// that the oldest is forgotten first.
	byAge [2]list.List
	// stacks holds each key and mode's acquisitions, oldest first.
	stacks map[holdKey][]*list.Element
}

// newHolds returns holds that remember at most limit acquisitions of each
// level.
func newHolds(limit int) *holds {
	return &holds{limit: limit, stacks: make(map[holdKey][]*list.Element)}
}

// levelIndex is the index of byAge for xact.
func levelIndex(xact bool) int {
	if xact {
		return 1
	}
	return 0
}

// acquired remembers that keys were acquired in mode shared at level xact
// at time at.
func (h *holds) acquired(keys []advisory.Key, xact, shared bool, at time.Time) {
	if h.limit == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	ages := &h.byAge[levelIndex(xact)]
	for _, k := range keys {
		hk := holdKey{key: k, xact: xact, shared: shared}
		h.seq++
		e := ages.PushBack(&hold{hk: hk, at: at, seq: h.seq})
		h.stacks[hk] = append(h.stacks[hk], e)
		if ages.Len() > h.limit {
			h.forgetOldest(ages)
		}
	}
}

// forgetOldest forgets the oldest acquisition of ages, which is the
// bottom of its key's stack.
func (h *holds) forgetOldest(ages *list.List) {
	old := ages.Remove(ages.Front()).(*hold)
	s := h.stacks[old.hk]
	s[0] = nil
	if len(s) == 1 {
		delete(h.stacks, old.hk)
		return
	}
	h.stacks[old.hk] = s[1:]
}

// released takes the newest acquisition of key at level xact out, in mode
// shared when modeKnown, else in the mode acquired newest, and returns
// it; ok is false when none is remembered.
func (h *holds) released(key advisory.Key, xact, shared, modeKnown bool) (acq hold, ok bool) {
	if h.limit == 0 {
		return hold{}, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	hk := holdKey{key: key, xact: xact, shared: shared}
	if !modeKnown {
		ex, sh := h.newest(holdKey{key, xact, false}), h.newest(holdKey{key, xact, true})
		switch {
		case ex == nil && sh == nil:
			return hold{}, false
		case ex == nil || (sh != nil && sh.seq > ex.seq):
			hk.shared = true
		default:
			hk.shared = false
		}
	}
	s := h.stacks[hk]
	if len(s) == 0 {
		return hold{}, false
	}
	e := s[len(s)-1]
	s[len(s)-1] = nil
	if len(s) == 1 {
		delete(h.stacks, hk)
	} else {
		h.stacks[hk] = s[:len(s)-1]
	}
	return *h.byAge[levelIndex(xact)].Remove(e).(*hold), true
}

// newest returns the newest acquisition of hk, or nil.
func (h *holds) newest(hk holdKey) *hold {
	s := h.stacks[hk]
	if len(s) == 0 {
		return nil
	}
	return s[len(s)-1].Value.(*hold)
}

// len returns how many acquisitions of each level are remembered.
func (h *holds) len() (session, xact int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.byAge[0].Len(), h.byAge[1].Len()
}
