package scope

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// A MuxLease is a lease that a Mux holds on one of its carriers. It
// offers what a Lease does: a context that ends the moment it is lost or
// released, its error, its fencing token, and Release.
type MuxLease struct {
	c      *carrier
	key    sqltext.Key
	shared bool
	token  int64
	hooks  Hooks

	ctx    context.Context
	cancel context.CancelCauseFunc

	mu     sync.Mutex
	err    error // set once: the loss, or context.Canceled when released
	once   sync.Once
	relErr error
}

// try tries key on the carrier with one statement, and returns the lease
// when it was taken, or nil and no error when the key is busy. Whatever
// ctx does, the statement runs to its end, bounded by the heartbeat
// interval, so that the carrier's session is never left in doubt; a lock
// taken for a caller whose ctx has ended is released at once.
func (c *carrier) try(ctx context.Context, key sqltext.Key, o *Options, op string, h Hooks) (*MuxLease, error) {
	if err := c.take(ctx); err != nil {
		if !errors.Is(err, errCarrierLost) {
			err = Fail(ctx, op, key.String(), err)
		}
		return nil, err
	}
	defer c.give()
	taken, token, err := c.tryStatement(key, o, op)
	if err == nil && taken && ctx.Err() != nil {
		// The caller gave up while the statement ran.
		err = c.unlock(key, o.Shared)
		if err == nil {
			err = Fail(ctx, op, key.String(), ctx.Err())
		}
		return nil, err
	}
	if err != nil || !taken {
		return nil, err
	}
	l := &MuxLease{c: c, key: key, shared: o.Shared, token: token, hooks: h}
	l.ctx, l.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	if !c.hold(l) {
		return nil, errCarrierLost
	}
	return l, nil
}

// tryStatement sends the try, creating the fencing sequence first when
// the try finds it missing. It reports whether the lock was taken, with
// the token. A session that is not the carrier's, or that fails in doubt,
// loses the carrier: the error is then errCarrierLost.
func (c *carrier) tryStatement(key sqltext.Key, o *Options, op string) (taken bool, token int64, err error) {
	for created := false; ; created = true {
		taken, token, err = c.tryOnce(key, o)
		if o.Fencing && !created && SQLState(err) == "42P01" {
			err = c.run(func(ctx context.Context) error {
				_, err := c.s.Exec(ctx, sqltext.CreateFencingSequence)
				if SQLState(err) == "23505" || SQLState(err) == "42P07" {
					err = nil // another session created it first
				}
				return err
			})
			if err == nil {
				continue
			}
		}
		break
	}
	switch {
	case err == nil, errors.Is(err, errCarrierLost):
	case pooledStatement(err):
		err = FailKind("lease", key.String(), ErrSharedSession, err)
		c.lose(err)
		err = fmt.Errorf("%w: %w", errCarrierLost, err)
	case survives(err):
		err = Fail(context.Background(), op, key.String(), err)
	default:
		c.lose(err)
		err = fmt.Errorf("%w: %w", errCarrierLost, err)
	}
	return taken, token, err
}

// tryOnce sends the try: rows tell the answer without fencing, the value
// with it.
func (c *carrier) tryOnce(key sqltext.Key, o *Options) (taken bool, token int64, err error) {
	var ours bool
	err = c.run(func(ctx context.Context) error {
		if o.Fencing {
			fenced := sqltext.CarrierTryFenced(c.m.form, c.pid, c.mark, o.Shared, key)
			var t *int64 // NULL when the session is not the carrier's
			if err := c.s.QueryRow(ctx, fenced.Query, fenced.Args...).Scan(&t); err != nil {
				return err
			}
			if ours = t != nil; ours {
				taken, token = *t > 0, *t
			}
			return nil
		}
		n, err := run(ctx, c.s, sqltext.CarrierTry(c.pid, c.mark, o.Shared, key))
		ours, taken = n > 0, n == 2
		return err
	})
	if err == nil && !ours {
		err = FailKind("lease", key.String(), ErrSharedSession, errElsewhere)
		c.lose(err)
		err = fmt.Errorf("%w: %w", errCarrierLost, err)
	}
	return taken, token, err
}

// unlock releases one hold of key on the carrier. The caller holds the
// turn. A failure, or a key the session did not hold, loses the carrier,
// since what it holds is then in doubt; the error is then errCarrierLost.
func (c *carrier) unlock(key sqltext.Key, shared bool) error {
	var n int64
	err := c.run(func(ctx context.Context) (err error) {
		n, err = run(ctx, c.s, sqltext.CarrierUnlock(c.pid, c.mark, shared, key))
		return err
	})
	switch {
	case err == nil && n == sqltext.HoldsElsewhere:
		err = FailKind("unlock", key.String(), ErrSharedSession, errElsewhere)
	case err == nil && n != 1:
		err = FailKind("unlock", key.String(), ErrNotHeld, nil)
	}
	if err != nil {
		c.lose(err)
		return fmt.Errorf("%w: %w", errCarrierLost, err)
	}
	return nil
}

// Context returns the lease's context, cancelled when the lease is lost or
// released; context.Cause tells which.
func (l *MuxLease) Context() context.Context { return l.ctx }

// Token returns the fencing token, or 0 without fencing.
func (l *MuxLease) Token() int64 { return l.token }

// Beats returns how many heartbeats the lease's connection has sent whose
// statement has ended, answered or not: each proves every lease on the
// connection. Tests count a heartbeat's round trips with it.
func (l *MuxLease) Beats() int64 {
	l.c.m.mu.Lock()
	defer l.c.m.mu.Unlock()
	return l.c.beats
}

// Err returns nil while the lease holds, an error matching ErrLockLost
// after a loss, and context.Canceled after Release.
func (l *MuxLease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// lose records the loss, once, cancels the lease's context, and tells
// the observer.
func (l *MuxLease) lose(cause error) {
	if l.settleLost(cause) {
		l.notifyLost(cause)
	}
}

// settleLost records the loss, once, and cancels the lease's context. It
// reports whether the lease was not settled before.
func (l *MuxLease) settleLost(cause error) bool {
	err := FailKind("lease", l.key.String(), ErrLockLost, cause)
	return l.settle(err, err)
}

// notifyLost tells the observer of the loss.
func (l *MuxLease) notifyLost(cause error) {
	if l.hooks != nil {
		l.hooks.Lost(l.ctx, l.key, cause)
	}
}

// end records that the lease ended without a loss, once, with cause as
// its context's cause.
func (l *MuxLease) end(cause error) { l.settle(context.Canceled, cause) }

// settle sets the lease's error and cancels its context with cause,
// unless it was settled before; it reports whether it was not.
func (l *MuxLease) settle(err, cause error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return false
	}
	l.err = err
	l.cancel(cause)
	return true
}

// Release releases the lease's lock with one statement on its carrier,
// once: later calls return the first result. Releases on one carrier that
// wait while a statement is in flight there go together in the next
// statement, which releases all their keys. It reports an error matching
// ErrLockLost if the lease was lost before it, or if its key was not held
// when released. The release waits for the carrier's turn whatever ctx
// does, so that a cancelled caller still releases; every statement on a
// carrier is bounded by the heartbeat interval.
func (l *MuxLease) Release(ctx context.Context) error {
	l.once.Do(func() {
		l.relErr = l.release()
		if l.hooks != nil {
			op := "unlock"
			if l.shared {
				op = "unlock shared"
			}
			l.hooks.Released(ctx, op, []sqltext.Key{l.key}, l.relErr)
		}
	})
	return l.relErr
}

func (l *MuxLease) release() error {
	l.c.release(l)
	return l.lostErr()
}

// lostErr returns the lease's loss, or nil when it ended without one.
func (l *MuxLease) lostErr() error {
	if err := l.Err(); err != context.Canceled {
		return err
	}
	return nil
}
