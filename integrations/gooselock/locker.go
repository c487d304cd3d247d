package gooselock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/pressly/goose/v3/lock"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// A Locker is a goose [lock.Locker] that holds goose's lock as a
// pgadvisory lease ([advisory.Acquire]) on a connection of its own from
// goose's *sql.DB: give it to goose.NewProvider with goose.WithLocker.
//
// Its heartbeat runs beside the migrations, not between their statements,
// so it finds a loss within two intervals even while one statement runs
// for an hour. The lease is not the migrations' session, though: a loss
// reaches them only through their context, which [CancelOnLoss] gives the
// locker to cancel. Without it, a migration goes on after a loss until it
// ends, and only Unlock reports the loss. It costs one connection more
// than a [SessionLocker]: with db.SetMaxOpenConns(1) the lock waits for a
// connection goose already holds, until its context ends.
//
// A Locker holds one lock at a time: a second Lock waits, in the process,
// until the first one's Unlock or the end of its own context. Use one
// Locker per Provider.
type Locker struct {
	key  advisory.Key
	opts []advisory.LeaseOption

	turn chan struct{} // full from Lock to Unlock

	mu    sync.Mutex
	lease *advisory.Lease
	stop  func() bool // stops the loss's cancel of the Lock's context
}

var _ lock.Locker = (*Locker)(nil)

// NewLocker returns a Locker that takes key, such as [DefaultKey], as
// opts say. An option out of range is an error matching
// [advisory.ErrBadOption].
func NewLocker(key advisory.Key, opts ...Option) (*Locker, error) {
	o, err := parse(opts)
	if err != nil {
		return nil, err
	}
	return &Locker{key: key, opts: o.leaseOptions(), turn: make(chan struct{}, 1)}, nil
}

// Key returns the key the locker takes.
func (l *Locker) Key() advisory.Key { return l.key }

// Lock takes an exclusive session lock on the locker's key on a
// connection of its own from db, and holds it as a lease until
// [Locker.Unlock] or a loss. It waits as [advisory.Acquire] does, in
// slices that hold no snapshot, for as long as ctx allows or [Wait] says;
// ctx bounds the wait only. If ctx came from [CancelOnLoss], a loss of the
// lease cancels it. On error nothing is held, and a session in doubt has
// been closed.
func (l *Locker) Lock(ctx context.Context, db *sql.DB) error {
	select {
	case l.turn <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("gooselock: lock %v: %w", l.key, ctx.Err())
	}
	lease, err := advisory.Acquire(ctx, db, l.key, l.opts...)
	if err != nil {
		<-l.turn
		return fmt.Errorf("gooselock: lock %v: %w", l.key, err)
	}
	lost := lossCancel(ctx)
	stop := context.AfterFunc(lease.Context(), func() {
		// The lease's context ends on a loss and on Release; only a
		// loss leaves Err matching ErrLockLost.
		if err := lease.Err(); errors.Is(err, advisory.ErrLockLost) {
			lost(fmt.Errorf("gooselock: lock %v: %w", l.key, err))
		}
	})
	l.mu.Lock()
	l.lease, l.stop = lease, stop
	l.mu.Unlock()
	return nil
}

// Unlock releases the lock [Locker.Lock] took, stops its heartbeat, and
// returns the lease's connection to the pool; it runs whatever ctx, as
// [advisory.Lease.Release] does. It returns an error matching
// [advisory.ErrLockLost] if the lease was lost before it, and then the
// lease's session has been closed, never pooled. db is not used: the
// lease knows its connection.
func (l *Locker) Unlock(ctx context.Context, _ *sql.DB) error {
	l.mu.Lock()
	lease, stop := l.lease, l.stop
	l.lease, l.stop = nil, nil
	l.mu.Unlock()
	if lease == nil {
		return fmt.Errorf("gooselock: unlock %v: the locker holds no lock", l.key)
	}
	err := lease.Release(ctx)
	stop()
	<-l.turn
	if err != nil {
		err = fmt.Errorf("gooselock: unlock %v: %w", l.key, err)
		if errors.Is(err, advisory.ErrLockLost) {
			lossCancel(ctx)(err)
		}
		return err
	}
	return nil
}
