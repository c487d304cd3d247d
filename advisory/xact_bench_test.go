package advisory_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/scope"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// xactVariants measure one transaction lock call inside an open
// transaction; begin and commit are not timed. The groups are those of
// sessionVariants.
var xactVariants = slices.Concat([]benchVariant{
	{name: "baseline", op: func(ctx context.Context, h *benchHandle, _ int64) error {
		return execSelect1(ctx, h.tx)
	}},
	{name: "ours", keyed: true, group: "try", op: func(ctx context.Context, h *benchHandle, k int64) error {
		ok, err := advisory.TryXactLock(ctx, h.tx, advisory.Int64Key(k))
		if err == nil && !ok {
			err = fmt.Errorf("TryXactLock(%d): not acquired", k)
		}
		return err
	}},
	// guarded sends the library's own statement by hand: the try behind
	// its guard against a hot standby and a lease's backend, in the form
	// the driver takes. ours over guarded is the library's cost on the
	// client, guarded over the best form by hand the guard's on the
	// server.
	{name: "guarded", keyed: true, group: "try", op: func(ctx context.Context, h *benchHandle, k int64) error {
		st := sqltext.TryLockStmt(scope.ConnForm(h.conn), sqltext.Guarded, true, false, sqltext.KeyOf(advisory.Int64Key(k)))
		return execOne(ctx, h.tx, st.Query, st.Args...)
	}},
	// lock is advisory.XactLock on a free key, against the blocking
	// statement by hand, as for sessionVariants.
	{name: "lock", keyed: true, group: "lock", op: func(ctx context.Context, h *benchHandle, k int64) error {
		return advisory.XactLock(ctx, h.tx, advisory.Int64Key(k))
	}},
	{name: "exec-lock-inline", keyed: true, hand: true, group: "lock", op: func(ctx context.Context, h *benchHandle, k int64) error {
		return execOne(ctx, h.tx, "SELECT pg_catalog.pg_advisory_xact_lock("+strconv.FormatInt(k, 10)+")")
	}},
	{name: "exec-lock-param", keyed: true, hand: true, group: "lock", op: func(ctx context.Context, h *benchHandle, k int64) error {
		return execOne(ctx, h.tx, "SELECT pg_catalog.pg_advisory_xact_lock($1)", k)
	}},
}, handVariants("try", "", func(f handForm) benchOp {
	return func(ctx context.Context, h *benchHandle, k int64) error {
		return f.call(ctx, h.tx, "pg_try_advisory_xact_lock", k)
	}
}))

// BenchmarkTryXactLock measures one TryXactLock call in an open
// transaction, without begin and commit.
func BenchmarkTryXactLock(b *testing.B) { benchLocks(b, true, xactVariants) }

// BenchmarkInterleavedTryXactLock does for [BenchmarkTryXactLock] what
// [BenchmarkInterleavedTryLock] does for [BenchmarkTryLock].
func BenchmarkInterleavedTryXactLock(b *testing.B) { benchInterleaved(b, true, xactVariants) }
