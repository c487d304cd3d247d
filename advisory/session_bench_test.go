package advisory_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// sessionVariants measure a session lock and its unlock: two statements
// per op, so the baseline sends "SELECT 1" twice. The library's try
// (ours, observed) is set against every form of the try and its unlock
// by hand, the group "try"; its uncontended wait (lock) against the
// blocking statement by hand, the group "lock".
var sessionVariants = slices.Concat([]benchVariant{
	{name: "baseline", op: func(ctx context.Context, h *benchHandle, _ int64) error {
		if err := execSelect1(ctx, h.conn); err != nil {
			return err
		}
		return execSelect1(ctx, h.conn)
	}},
	{name: "ours", keyed: true, group: "try", op: func(ctx context.Context, h *benchHandle, k int64) error {
		key := advisory.Int64Key(k)
		ok, err := advisory.TryLock(ctx, h.conn, key)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("TryLock(%v): not acquired", key)
		}
		return advisory.Unlock(ctx, h.conn, key)
	}},
	// observed is ours with an Observer attached, to show what observing
	// costs; ours itself runs with none, which costs one atomic load.
	{name: "observed", keyed: true, group: "try", op: func(ctx context.Context, h *benchHandle, k int64) error {
		advisory.SetObserver(nopObserver{})
		defer advisory.SetObserver(nil)
		key := advisory.Int64Key(k)
		ok, err := advisory.TryLock(ctx, h.conn, key)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("TryLock(%d): not acquired", k)
		}
		return advisory.Unlock(ctx, h.conn, key)
	}},
	// lock is advisory.Lock on a free key, which tries it, and
	// exec-lock-inline and exec-lock-param the blocking statement by hand:
	// an uncontended Lock costs what that statement does.
	{name: "lock", keyed: true, group: "lock", op: func(ctx context.Context, h *benchHandle, k int64) error {
		key := advisory.Int64Key(k)
		if err := advisory.Lock(ctx, h.conn, key); err != nil {
			return err
		}
		return advisory.Unlock(ctx, h.conn, key)
	}},
	{name: "exec-lock-inline", keyed: true, hand: true, group: "lock", op: func(ctx context.Context, h *benchHandle, k int64) error {
		s := strconv.FormatInt(k, 10)
		if err := execOne(ctx, h.conn, "SELECT pg_catalog.pg_advisory_lock("+s+")"); err != nil {
			return err
		}
		return execOne(ctx, h.conn, "SELECT 1 WHERE pg_catalog.pg_advisory_unlock("+s+")")
	}},
	{name: "exec-lock-param", keyed: true, hand: true, group: "lock", op: func(ctx context.Context, h *benchHandle, k int64) error {
		if err := execOne(ctx, h.conn, "SELECT pg_catalog.pg_advisory_lock($1)", k); err != nil {
			return err
		}
		return execOne(ctx, h.conn, "SELECT 1 WHERE pg_catalog.pg_advisory_unlock($1)", k)
	}},
}, handVariants("try", "", func(f handForm) benchOp {
	return func(ctx context.Context, h *benchHandle, k int64) error {
		if err := f.call(ctx, h.conn, "pg_try_advisory_lock", k); err != nil {
			return err
		}
		return f.call(ctx, h.conn, "pg_advisory_unlock", k)
	}
}))

// BenchmarkTryLock measures a session TryLock followed by its Unlock: two
// statements per op.
func BenchmarkTryLock(b *testing.B) { benchLocks(b, false, sessionVariants) }

// BenchmarkInterleavedTryLock runs every variant of [BenchmarkTryLock]
// once per op, each on its own connection, and reports each variant's mean
// time per call as a metric ("ours-freshkey-ns/call"), and each library
// call's over the fastest form by hand of its group
// ("ours-freshkey/best"). On a shared machine the load drifts over the
// seconds that separate two sub-benchmarks; interleaved calls see the
// same load, so their ratios hold up better. The order is shuffled anew
// for every op, so that no variant always follows the same one.
func BenchmarkInterleavedTryLock(b *testing.B) { benchInterleaved(b, false, sessionVariants) }

// nopObserver observes and does nothing.
type nopObserver struct{}

func (nopObserver) ObserveAcquire(context.Context, advisory.Acquisition) {}

func (nopObserver) ObserveRelease(context.Context, advisory.Release) {}

func (nopObserver) ObserveLoss(context.Context, advisory.Loss) {}
