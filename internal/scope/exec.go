package scope

import (
	"context"
	"slices"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// run sends one statement, with args, on q and returns how many rows it
// affected, which is how every boolean answer comes back (see
// internal/sqltext). A nil error while ctx is done is not trusted: a
// driver can report success for a wait whose context expired as it ended,
// after it dropped the session, so run reports ctx's error instead. On a
// server that does not answer, run returns within ctx's deadline plus
// [AbortMargin], on lib/pq too, and the session is then lost (see
// [Querier.Exec]).
func run(ctx context.Context, q Querier, query string, args ...any) (int64, error) {
	n, err := q.Exec(ctx, query, args...)
	if err == nil {
		if err = ctx.Err(); err == nil {
			return n, nil
		}
	}
	return 0, err
}

// ReleaseTimeout bounds a release that runs after the caller's context
// was cancelled.
const ReleaseTimeout = 10 * time.Second

// ReleaseContext returns a context for releasing locks: it keeps ctx's
// values but not its cancellation, so a cancelled caller still releases,
// and it ends after ReleaseTimeout. A ctx that can never end (its Done is
// nil, as context.Background's is) is returned as it is: nothing can cut
// the release short, and the driver is not asked to watch a context,
// which costs it a timer, and on lib/pq a goroutine, per statement. Such a
// release is bounded as the caller's other statements are, by the driver
// and the server alone.
func ReleaseContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Done() == nil {
		return ctx, noCancel
	}
	return detachedContext(ctx)
}

// noCancel is the CancelFunc of a context that needs none.
func noCancel() {}

// detachedContext returns a context that keeps ctx's values but not its
// cancellation, and ends after ReleaseTimeout: a session scope ends under
// it, so that a ctx that ends as the scope ends cannot cut the release
// short and make a lock that was held look lost.
func detachedContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), ReleaseTimeout)
}

// Acquire sends stmt, which takes keys on s as operation op, and reports
// whether a try took them. On any error the session is discarded, since a
// grant may have raced the failure; a refusal took nothing, and one for a
// stale mark removes it and tries again once (see guard.go).
func Acquire(ctx context.Context, s Session, op string, keys []sqltext.Key, stmt sqltext.Stmt) (bool, error) {
	return AcquireWith(ctx, DefaultHooks(), s, op, keys, stmt)
}

// AcquireWith is Acquire, observed by h (which may be nil).
func AcquireWith(ctx context.Context, h Hooks, s Session, op string, keys []sqltext.Key, stmt sqltext.Stmt) (bool, error) {
	if s == nil {
		return false, ErrNilConn
	}
	if err := checkSession(ctx, s, op, KeyList(keys)); err != nil {
		return false, err
	}
	start := now(h)
	n, err := healed(ctx, s, func() (int64, error) { return run(ctx, s, stmt.Query, stmt.Args...) })
	acquired := false
	if err != nil {
		if refusal(err) == nil || ctx.Err() != nil {
			// A refusal takes nothing (see guard.go); any other
			// failure may have raced a grant.
			s.Discard()
		}
		err = FailWait(ctx, op, KeyList(keys), err)
	} else {
		acquired = n > 0
	}
	if h != nil {
		// A copy, so that keys stays on the caller's stack when nothing
		// is observed.
		h.Acquired(ctx, op, slices.Clone(keys), since(h, start), acquired, err)
	}
	return acquired, err
}

// Release sends stmt, which releases keys on s as operation op, and
// expects one row per key. A failure or a key that was not held discards
// the session, since what it holds is then in doubt.
func Release(ctx context.Context, s Session, op string, keys []sqltext.Key, stmt sqltext.Stmt) error {
	if s == nil {
		return ErrNilConn
	}
	rctx, cancel := ReleaseContext(ctx)
	defer cancel()
	n, err := run(rctx, s, stmt.Query, stmt.Args...)
	switch {
	case err != nil:
		s.Discard()
		err = Fail(rctx, op, KeyList(keys), err)
	case n != int64(len(keys)):
		s.Discard()
		err = FailKind(op, KeyList(keys), ErrNotHeld, nil)
	}
	if h := DefaultHooks(); h != nil {
		h.Released(ctx, op, slices.Clone(keys), err)
	}
	return err
}

// UnlockAll releases every session lock s holds, exclusive and shared,
// however often each was taken, under [ReleaseContext]. A failure
// discards the session, since what it holds is then in doubt.
func UnlockAll(ctx context.Context, s Session) error {
	if s == nil {
		return ErrNilConn
	}
	rctx, cancel := ReleaseContext(ctx)
	defer cancel()
	if _, err := run(rctx, s, sqltext.UnlockAll); err != nil {
		s.Discard()
		return Fail(rctx, "unlock all", "", err)
	}
	return nil
}

// XactAcquire sends stmt, which takes keys in tx as operation op, and
// reports whether a try took them.
func XactAcquire(ctx context.Context, tx Tx, op string, keys []sqltext.Key, stmt sqltext.Stmt) (bool, error) {
	return XactAcquireWith(ctx, DefaultHooks(), tx, op, keys, stmt)
}

// XactAcquireWith is XactAcquire, observed by h (which may be nil).
func XactAcquireWith(ctx context.Context, h Hooks, tx Tx, op string, keys []sqltext.Key, stmt sqltext.Stmt) (bool, error) {
	if tx == nil {
		return false, ErrNilTx
	}
	if err := checkXact(ctx, tx, op, KeyList(keys)); err != nil {
		return false, err
	}
	start := now(h)
	n, err := run(ctx, tx, stmt.Query, stmt.Args...)
	acquired := false
	if err != nil {
		err = FailWait(ctx, op, KeyList(keys), err)
	} else {
		acquired = n > 0
	}
	if h != nil {
		// A copy, so that keys stays on the caller's stack when nothing
		// is observed.
		h.Acquired(ctx, op, slices.Clone(keys), since(h, start), acquired, err)
	}
	return acquired, err
}
