package leader

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// LeadFunc is the work a leader does while it leads. ctx ends when the
// lease is lost or Run's context ends; l is the lease, whose
// [advisory.Lease.Token] fences what the leader writes.
type LeadFunc func(ctx context.Context, l *advisory.Lease) error

// An Option configures [Run].
type Option func(*options)

type options struct {
	heartbeat  time.Duration
	minBackoff time.Duration
	maxBackoff time.Duration
	fencing    bool
}

// defaultHeartbeat is the interval of a lease's heartbeat when Heartbeat
// is not given: advisory's default.
const defaultHeartbeat = 5 * time.Second

// Heartbeat sets the interval of the lease's heartbeat: a lost lead is
// noticed within 2d. The default is 5 seconds. d must be at least a
// millisecond: [Run] returns an error matching [advisory.ErrBadOption]
// for a shorter one. Of several Heartbeat options, the last one counts.
func Heartbeat(d time.Duration) Option {
	return func(o *options) { o.heartbeat = d }
}

// Backoff sets how long Run waits before it campaigns again after a lost
// lead or a failed campaign: min at first, doubling with each failure in a
// row up to max, with up to a quarter more at random so that candidates
// spread out. The defaults are 100 milliseconds and 10 seconds. min must
// be positive and max at least min: [Run] returns an error matching
// [advisory.ErrBadOption] otherwise. Of several Backoff options, the last
// one counts.
func Backoff(min, max time.Duration) Option {
	return func(o *options) { o.minBackoff, o.maxBackoff = min, max }
}

// Fencing makes each lease carry a fencing token, as [advisory.Fencing]
// says: fn reads it with l.Token().
func Fencing() Option { return func(o *options) { o.fencing = true } }

// parse applies opts, in order, over the defaults, skipping nil options,
// and checks the result: an error wraps advisory.ErrBadOption.
func parse(opts []Option) (options, error) {
	o := options{heartbeat: defaultHeartbeat, minBackoff: 100 * time.Millisecond, maxBackoff: 10 * time.Second}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	switch {
	case o.heartbeat < time.Millisecond:
		return o, fmt.Errorf("leader: %w: Heartbeat(%v) must be at least a millisecond", advisory.ErrBadOption, o.heartbeat)
	case o.minBackoff <= 0 || o.maxBackoff < o.minBackoff:
		return o, fmt.Errorf("leader: %w: Backoff(%v, %v): want 0 < min <= max", advisory.ErrBadOption, o.minBackoff, o.maxBackoff)
	}
	return o, nil
}

// releaseTimeout bounds the release of a lease once fn has returned.
const releaseTimeout = 10 * time.Second

// Run campaigns for leadership of key and runs fn while it leads, again
// and again, until ctx ends; the package documentation says what fn's
// return means. It returns ctx.Err() when ctx ends, fn's error when fn
// fails while leading, and the campaign's error when the lease can never
// work (see [advisory.Acquire]); in every case after fn has returned and
// the lease has been released.
//
// Each campaign holds one connection of db while it waits and while it
// leads.
func Run(ctx context.Context, db *sql.DB, key advisory.Key, fn LeadFunc, opts ...Option) error {
	switch {
	case db == nil:
		return errors.New("leader: nil *sql.DB")
	case fn == nil:
		return errors.New("leader: nil LeadFunc")
	}
	o, err := parse(opts)
	if err != nil {
		return err
	}
	lopts := []advisory.LeaseOption{advisory.Heartbeat(o.heartbeat)}
	if o.fencing {
		lopts = append(lopts, advisory.Fencing())
	}
	failures := 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		l, err := advisory.Acquire(ctx, db, key, lopts...)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, advisory.ErrSharedSession) || errors.Is(err, advisory.ErrStandby) {
				return err
			}
			if err := sleep(ctx, backoff(&o, failures)); err != nil {
				return err
			}
			failures++
			continue
		}
		started := time.Now()
		ferr := lead(ctx, l, fn)
		lost := l.Err() != nil
		_ = release(ctx, l)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case !lost && ferr != nil:
			return ferr
		case !lost:
			failures = 0 // stepped down: campaign again after the shortest backoff
		case time.Since(started) >= o.maxBackoff:
			failures = 0 // led long enough: this loss starts a new series
		}
		if err := sleep(ctx, backoff(&o, failures)); err != nil {
			return err
		}
		if lost {
			failures++
		}
	}
}

// lead runs fn with a context that ends when the lease is lost or ctx
// ends, and returns what fn returns. A panic in fn releases the lease and
// panics again.
func lead(ctx context.Context, l *advisory.Lease, fn LeadFunc) (err error) {
	fctx, cancel := context.WithCancelCause(l.Context())
	defer cancel(nil)
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	defer stop()
	defer func() {
		if p := recover(); p != nil {
			_ = release(ctx, l)
			panic(p)
		}
	}()
	return fn(fctx, l)
}

// release releases l with a context that ctx's end does not cancel.
func release(ctx context.Context, l *advisory.Lease) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	return l.Release(rctx)
}

// backoff returns the wait after failures failures in a row.
func backoff(o *options, failures int) time.Duration {
	d := o.minBackoff
	for range failures {
		if d >= o.maxBackoff/2 {
			d = o.maxBackoff
			break
		}
		d *= 2
	}
	return d + rand.N(d/4+1)
}

// sleep waits d or until ctx ends, and returns ctx.Err() in that case.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
