package gooselock

import (
	"fmt"
	"time"

	"github.com/pressly/goose/v3/lock"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// DefaultKey is the key goose's own PostgreSQL lockers take,
// [lock.DefaultLockID] as one bigint. A fleet that moves from goose's
// locker to this package's keeps one lock on the way: an old instance
// and a new one exclude each other.
var DefaultKey = advisory.Int64Key(lock.DefaultLockID)

// An Option configures [NewSessionLocker] and [NewLocker].
type Option func(*options)

// options are the settings of a locker.
type options struct {
	heartbeat time.Duration // 0: advisory's default
	wait      time.Duration
	bounded   bool // wait was given
}

// Heartbeat sets the interval of the lease's heartbeat to d, as
// [advisory.Heartbeat] does: a lost lock is found within 2d. The default
// is advisory's, 5 seconds. d must be at least a millisecond.
func Heartbeat(d time.Duration) Option {
	return func(o *options) { o.heartbeat = d }
}

// Wait bounds the wait for a busy key to d, as [advisory.Wait] does: the
// lock call then fails with an error matching [advisory.ErrLockTimeout],
// holding nothing. Wait(0) does not wait at all, and fails at once with an
// error matching [advisory.ErrNotAcquired] when another session holds the
// key. Without Wait, a lock call waits for as long as the context goose
// passes it (the one given to Up) allows. d must not be negative.
func Wait(d time.Duration) Option {
	return func(o *options) { o.wait, o.bounded = d, true }
}

// parse applies opts and checks them; an error matches
// [advisory.ErrBadOption].
func parse(opts []Option) (options, error) {
	var o options
	for _, opt := range opts {
		if opt == nil {
			return o, fmt.Errorf("gooselock: %w: nil Option", advisory.ErrBadOption)
		}
		opt(&o)
	}
	switch {
	case o.heartbeat != 0 && o.heartbeat < time.Millisecond:
		return o, fmt.Errorf("gooselock: %w: Heartbeat (%v) must be at least a millisecond", advisory.ErrBadOption, o.heartbeat)
	case o.bounded && o.wait < 0:
		return o, fmt.Errorf("gooselock: %w: Wait (%v) must not be negative", advisory.ErrBadOption, o.wait)
	}
	return o, nil
}

// sessionOptions returns o as advisory's options for a session scope held
// as a lease: it always has a heartbeat.
func (o options) sessionOptions() []advisory.SessionOption {
	hb := o.heartbeat
	if hb == 0 {
		hb = defaultHeartbeat
	}
	opts := []advisory.SessionOption{advisory.Heartbeat(hb)}
	if o.bounded {
		opts = append(opts, advisory.Wait(o.wait))
	}
	return opts
}

// leaseOptions returns o as advisory's options for [advisory.Acquire].
func (o options) leaseOptions() []advisory.LeaseOption {
	var opts []advisory.LeaseOption
	for _, so := range o.sessionOptions() {
		opts = append(opts, so)
	}
	return opts
}

// defaultHeartbeat is advisory's default heartbeat interval, which a
// session scope needs said: without Heartbeat it holds no lease.
const defaultHeartbeat = 5 * time.Second
