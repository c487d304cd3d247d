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

// A SessionLocker is a goose [lock.SessionLocker] that holds goose's lock
// as a pgadvisory lease on the connection goose runs the migrations on:
// give it to goose.NewProvider with goose.WithSessionLocker. It is safe
// for concurrent use, by several Providers too, each call on a connection
// of its own.
//
// The lock and the migrations share one session, so a lost lock ends the
// migration that runs there: a terminated backend fails goose's statement
// at once, and when the heartbeat finds the lock gone on a live session
// (someone ran pg_advisory_unlock_all there, say), it ends that session,
// and goose's next statement fails. Either way the migration's transaction
// is rolled back, and goose's call returns an error matching
// [advisory.ErrLockLost]. A Go migration without a transaction runs on
// another session of goose's *sql.DB, where only its context can reach
// it: see [CancelOnLoss].
type SessionLocker struct {
	key  advisory.Key
	opts []advisory.SessionOption

	mu   sync.Mutex
	held map[*sql.Conn]*hold
}

var _ lock.SessionLocker = (*SessionLocker)(nil)

// A hold is one lock a SessionLocker holds on one connection: a session
// scope of advisory's, whose fn runs on a goroutine of its own from
// SessionLock to SessionUnlock.
type hold struct {
	locked  chan struct{} // closed once the lock is held
	release chan struct{} // closed by SessionUnlock
	done    chan error    // the scope's result
}

// NewSessionLocker returns a SessionLocker that takes key, such as
// [DefaultKey], as opts say. An option out of range is an error matching
// [advisory.ErrBadOption].
func NewSessionLocker(key advisory.Key, opts ...Option) (*SessionLocker, error) {
	o, err := parse(opts)
	if err != nil {
		return nil, err
	}
	return &SessionLocker{key: key, opts: o.sessionOptions(), held: make(map[*sql.Conn]*hold)}, nil
}

// Key returns the key the locker takes.
func (l *SessionLocker) Key() advisory.Key { return l.key }

// SessionLock takes an exclusive session lock on the locker's key on
// conn and holds it as a lease until [SessionLocker.SessionUnlock] on the
// same conn, or until the lease is lost. It waits for a busy key as
// [advisory.WithSessionLockConn] does, in slices that hold no snapshot,
// for as long as ctx allows or [Wait] says; ctx bounds the wait only, not
// the hold. If ctx came from [CancelOnLoss], a loss of the lease cancels
// it.
//
// On error nothing is held. After a wait that ctx interrupted, the
// session is closed rather than put back in the pool, since the lock may
// have been granted as the wait ended; conn then reports
// [sql.ErrConnDone], and goose's own close of it says so too.
func (l *SessionLocker) SessionLock(ctx context.Context, conn *sql.Conn) error {
	if conn == nil {
		return fmt.Errorf("gooselock: lock %v: nil *sql.Conn", l.key)
	}
	h := &hold{locked: make(chan struct{}), release: make(chan struct{}), done: make(chan error, 1)}
	l.mu.Lock()
	if _, ok := l.held[conn]; ok {
		l.mu.Unlock()
		return fmt.Errorf("gooselock: lock %v: the connection already holds this locker's lock", l.key)
	}
	l.held[conn] = h
	l.mu.Unlock()

	lost := lossCancel(ctx)
	// The scope runs under a context of its own, which ctx ends only
	// until the lock is held: ctx bounds the wait, and the hold lasts
	// until SessionUnlock, which goose calls under a context that cannot
	// end.
	sctx, scancel := context.WithCancel(context.WithoutCancel(ctx))
	stopWait := context.AfterFunc(ctx, scancel)
	go func() {
		defer scancel()
		h.done <- advisory.WithSessionLockConn(sctx, conn, l.key, func(fctx context.Context, _ *sql.Conn) error {
			if !stopWait() {
				// ctx ended as the lock was granted: give it up.
				return ctx.Err()
			}
			close(h.locked)
			select {
			case <-h.release:
			case <-fctx.Done():
				// Only a loss of the lease ends fctx before
				// SessionUnlock. The scope ends the session, and
				// reports the loss when fn returns.
				lost(fmt.Errorf("gooselock: lock %v: %w", l.key, advisory.ErrLockLost))
				<-h.release
			}
			return nil
		}, l.opts...)
	}()
	select {
	case <-h.locked:
		return nil
	case err := <-h.done:
		l.forget(conn)
		return fmt.Errorf("gooselock: lock %v: %w", l.key, err)
	}
}

// SessionUnlock releases the lock [SessionLocker.SessionLock] took on
// conn and stops its heartbeat. It runs whatever ctx, as goose calls it
// under a context that cannot end, and returns within ten seconds plus
// [advisory.AbortMargin] on a server that stops answering.
//
// conn goes back to goose, which closes it into the pool, only when the
// lock was released cleanly. When the lease was lost, or the release
// failed or found the key not held, SessionUnlock returns an error
// matching [advisory.ErrLockLost] and the session has been closed, never
// pooled: conn then reports [sql.ErrConnDone]. (goose's own PostgreSQL
// locker leaves a session whose unlock failed in the pool.)
func (l *SessionLocker) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	h := l.forget(conn)
	if h == nil {
		return fmt.Errorf("gooselock: unlock %v: the connection holds no lock of this locker", l.key)
	}
	close(h.release)
	if err := <-h.done; err != nil {
		err = fmt.Errorf("gooselock: unlock %v: %w", l.key, err)
		if errors.Is(err, advisory.ErrLockLost) {
			lossCancel(ctx)(err)
		}
		return err
	}
	return nil
}

// forget removes and returns conn's hold, or nil if it has none.
func (l *SessionLocker) forget(conn *sql.Conn) *hold {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.held[conn]
	delete(l.held, conn)
	return h
}
