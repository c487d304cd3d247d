package scope

import (
	"context"
	"slices"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// Take takes session locks on keys on s as operation op, as o says
// (Try, Timeout, Shared, WaitSlice), and reports whether it took them. A
// single key is tried first, in form f, which is the whole of a try and of
// an uncontended wait: one round trip. A busy key, or several keys, are
// waited for in slices (see [waitInSlices]). Every statement refuses where
// the lock would not be real (see guard.go). On an error after which the
// session may hold a lock it did not report, the session is discarded; a
// wait that ran out holds nothing, and keeps it. A call refused for a
// stale mark removes it, and tries again once (see guard.go).
func Take(ctx context.Context, h Hooks, s Session, op string, keys []sqltext.Key, o *Options, f sqltext.Form) (bool, error) {
	if s == nil {
		return false, ErrNilConn
	}
	start := time.Now()
	acquired, err := healed(ctx, s, func() (bool, error) { return take(ctx, s, op, keys, o, f, start) })
	if h != nil {
		// A copy, so that keys stays on the caller's stack when nothing
		// is observed.
		h.Acquired(ctx, op, slices.Clone(keys), time.Since(start), acquired, err)
	}
	return acquired, err
}

// take is Take, unobserved.
func take(ctx context.Context, s Session, op string, keys []sqltext.Key, o *Options, f sqltext.Form, start time.Time) (bool, error) {
	if err := checkSession(ctx, s, op, KeyList(keys)); err != nil {
		return false, err
	}
	g := SessionGuard(ctx, s)
	if len(keys) == 1 {
		stmt := sqltext.TryLockStmt(f, g, false, o.Shared, keys[0])
		n, err := run(ctx, s, stmt.Query, stmt.Args...)
		if err != nil {
			if refusal(err) == nil || ctx.Err() != nil {
				// A refusal takes nothing; any other failure may
				// have raced a grant.
				s.Discard()
			}
			return false, FailWait(ctx, op, KeyList(keys), err)
		}
		if n > 0 || o.Try {
			return n > 0, nil
		}
	}
	w := waitInSlices(ctx, start, o, op, KeyList(keys), len(keys) == 1,
		func(ctx context.Context) (waitSettings, error) { return sessionWaitSettings(ctx, s) },
		func(ctx context.Context, _ int, ms int64, set waitSettings) error {
			var stmt sqltext.Stmt
			direct := len(keys) == 1 && !set.inBlock
			switch {
			case direct:
				stmt = sqltext.DirectSliceStmt(f, g, o.Shared, ms, keys[0])
			case len(keys) == 1:
				stmt = sqltext.SessionSliceStmt(f, g, o.Shared, ms, set.lock.Milliseconds(), keys[0])
			default:
				stmt = sqltext.Plain(sqltext.SessionSlice(g, o.Shared, ms, keys...))
			}
			_, err := run(ctx, s, stmt.Query, stmt.Args...)
			switch {
			case refusal(err) != nil && ctx.Err() == nil:
				return refusedError{FailWait(ctx, op, KeyList(keys), err)}
			case direct && SQLState(err) == "55P03" && ctx.Err() == nil:
				return grantedAsRanOut(ctx, s, f, o.Shared, keys[0], err)
			}
			return err
		})
	if w.doubt {
		s.Discard()
	}
	return w.err == nil, w.err
}

// grantedAsRanOut follows a direct slice for key on s that ran out with
// err (see [sqltext.DirectSliceStmt]): the server may have granted the
// lock as lock_timeout fired, and the failed statement keeps it. It
// returns nil when s holds key, so that the wait reports it taken; err
// when it does not; and the check's own failure, which leaves the session
// in doubt, when it cannot tell.
func grantedAsRanOut(ctx context.Context, s Session, f sqltext.Form, shared bool, key sqltext.Key, err error) error {
	held := sqltext.HeldHere(f, shared, key)
	n, checkErr := run(ctx, s, held.Query, held.Args...)
	switch {
	case checkErr != nil:
		return checkErr
	case n > 0:
		return nil
	}
	return err
}
