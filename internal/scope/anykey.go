package scope

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// The calls that take any one of several keys in one statement
// ([TryAny], [WaitAny]), and the one that wakes the sessions waiting for
// one of a range of keys ([CancelWaiters]). A semaphore is built on them.
// Their keys are of one key space, pairs sharing their first integer,
// none twice: the front end checks that before it calls.

// The operations the calls report in their errors.
const (
	opTryAny  = "try lock any"
	opWaitAny = "lock any"
	opCancel  = "cancel waiters"
)

// anyGuard is what a call for any of several keys on conn checks: a
// lease's own mark when a lease of this process holds conn itself, and no
// mark at all otherwise, whatever ctx. The session is the caller's, kept
// for choosing among the keys; a statement of it that a transaction
// pooler sent to the backend of the lease ctx descends from would be
// granted the key by stacking on that lease's locks.
func anyGuard(conn *sql.Conn) sqltext.Guard {
	return SessionGuard(context.Background(), SQLConn(conn))
}

// TryAny tries keys in order on conn and takes an exclusive session lock
// on the first that is free, in one statement. It returns the key's
// place in keys, or -1 when every key is taken. A refusal (ErrStandby,
// ErrSharedSession) takes nothing and keeps the session, and one for a
// stale mark removes it and tries again once (see guard.go); any other
// error discards it, since the statement may have taken a key before it failed.
func TryAny(ctx context.Context, conn *sql.Conn, keys []sqltext.Key) (int, error) {
	if conn == nil {
		return -1, ErrNilConn
	}
	s := SQLConn(conn)
	list := KeyList(keys)
	if err := checkSession(ctx, s, opTryAny, list); err != nil {
		return -1, err
	}
	h := DefaultHooks()
	start := now(h)
	stmt := sqltext.TryAny(ConnForm(conn), anyGuard(conn), keys)
	try := func() (int, error) {
		var o int64
		err := s.QueryRow(ctx, stmt.Query, stmt.Args...).Scan(&o)
		return answerAny(ctx, s, opTryAny, list, len(keys), o, err, false)
	}
	i, err := healed(ctx, s, try)
	observeAny(ctx, h, opTryAny, keys, start, i, err)
	return i, err
}

// WaitAny is [TryAny] that, when every key is taken, waits in the same
// statement for keys[0] for up to d, which is at most [DefaultSlice] and
// no less than a millisecond (the front end checks it). The statement
// first releases every session lock conn holds (see [sqltext.WaitAny]).
// A wait that runs out (SQLSTATE 55P03), or that the server cancels while
// ctx is live (57014), reports ErrLockTimeout and keeps the session; after
// a cancel the session may hold keys[0], granted as the cancel landed.
func WaitAny(ctx context.Context, conn *sql.Conn, keys []sqltext.Key, d time.Duration) (int, error) {
	if conn == nil {
		return -1, ErrNilConn
	}
	s := SQLConn(conn)
	list := KeyList(keys)
	if err := checkSession(ctx, s, opWaitAny, list); err != nil {
		return -1, err
	}
	h := DefaultHooks()
	start := now(h)
	ms := int64((d + time.Millisecond - 1) / time.Millisecond)
	stmt := sqltext.WaitAny(ConnForm(conn), anyGuard(conn), keys, ms)
	wait := func() (int, error) {
		var (
			restored string
			o        int64
		)
		err := s.QueryRow(ctx, stmt.Query, stmt.Args...).Scan(&restored, &o)
		return answerAny(ctx, s, opWaitAny, list, len(keys), o, err, true)
	}
	i, err := healed(ctx, s, wait)
	observeAny(ctx, h, opWaitAny, keys, start, i, err)
	return i, err
}

// answerAny turns the answer o, or the error err, of a statement of
// [TryAny] or [WaitAny] (wait) on s for n keys into the place of the key
// taken, or -1, and the call's error, discarding s when it may hold a key
// that the caller is not told of.
func answerAny(ctx context.Context, s Session, op, list string, n int, o int64, err error, wait bool) (int, error) {
	if err == nil && ctx.Err() != nil {
		// A driver can report success for a statement whose context
		// expired as it ended, after it dropped the session.
		err = ctx.Err()
	}
	live := ctx.Err() == nil
	switch {
	case err == nil && o == sqltext.SlotBusy && !wait: // a wait has no such answer
		return -1, nil
	case err == nil && o == sqltext.SlotStandby:
		return -1, FailKind(op, list, ErrStandby, nil)
	case err == nil && o == sqltext.SlotShared:
		return -1, FailKind(op, list, ErrSharedSession, errForeignMark)
	case err == nil && (o < 1 || o > int64(n)):
		s.Discard()
		return -1, FailKind(op, list, nil, fmt.Errorf("the server answered place %d of %d", o, n))
	case err == nil:
		return int(o - 1), nil
	case wait && live && (SQLState(err) == "55P03" || SQLState(err) == "57014"):
		// The wait ran out, holding nothing, or the server cancelled
		// it, when the session may hold keys[0]: either way the
		// session stays the caller's.
		return -1, FailKind(op, list, ErrLockTimeout, err)
	}
	s.Discard()
	return -1, Fail(ctx, op, list, err)
}

// observeAny reports a call for any of keys to h, if any: the key taken,
// at place i, or every key tried.
func observeAny(ctx context.Context, h Hooks, op string, keys []sqltext.Key, start time.Time, i int, err error) {
	if h == nil {
		return
	}
	if i >= 0 {
		h.Acquired(ctx, op, []sqltext.Key{keys[i]}, since(h, start), true, nil)
		return
	}
	h.Acquired(ctx, op, slices.Clone(keys), since(h, start), false, err)
}

// CancelWaiters runs, on conn, the statement that cancels the waiting
// statement of as many sessions as the n keys from base have free, those
// that have waited longest for one of them ([sqltext.SlotRing]), and
// returns how many it signalled. n must be at least 1 and base+n-1 must
// not pass the largest bigint (the front end checks it). A failure
// discards the session, so that a cancel of the driver's, still in
// flight, lands on no later statement of the pool's.
func CancelWaiters(ctx context.Context, conn *sql.Conn, base sqltext.Key, n int) (int64, error) {
	if conn == nil {
		return 0, ErrNilConn
	}
	if n < 1 || n > math.MaxInt32 {
		return 0, FailKind(opCancel, base.String(), nil, fmt.Errorf("%d keys: want 1 to %d", n, math.MaxInt32))
	}
	s := SQLConn(conn)
	stmt := sqltext.SlotRing(ConnForm(conn), base, n)
	var woken int64
	if err := s.QueryRow(ctx, stmt.Query, stmt.Args...).Scan(&woken); err != nil {
		s.Discard()
		return 0, Fail(ctx, opCancel, base.String(), err)
	}
	return woken, nil
}
