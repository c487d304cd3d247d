package advisory_test

import (
	"testing"

	"github.com/pgadvisory/pgadvisory/internal/compilecheck"
)

// TestOptionsCompileOnlyWhereTheyApply builds calls with each option in
// each kind of call: a call with an option that cannot apply to it does
// not compile, and one whose options all apply does.
func TestOptionsCompileOnlyWhereTheyApply(t *testing.T) {
	t.Parallel()
	compilecheck.Suite{
		Imports: []string{"context", "database/sql", "time", "github.com/pgadvisory/pgadvisory/advisory"},
		Params: "ctx context.Context, db *sql.DB, tx *sql.Tx, conn *sql.Conn, lk *advisory.Locker, k advisory.Key, " +
			"xfn func(context.Context, *sql.Tx) error, sfn func(context.Context, *sql.Conn) error",
		Misplaced: map[string]string{
			"TxOptionsOnACallersTx":  `_ = advisory.WithXactLockTx(ctx, tx, k, xfn, advisory.TxOptions(nil))`,
			"HeartbeatOnXact":        `_ = advisory.WithXactLock(ctx, db, k, xfn, advisory.Heartbeat(time.Second))`,
			"FencingOnXact":          `_ = advisory.WithXactLock(ctx, db, k, xfn, advisory.Fencing())`,
			"FencingOnSession":       `_ = advisory.WithSessionLock(ctx, db, k, sfn, advisory.Fencing())`,
			"TxOptionsOnSession":     `_ = advisory.WithSessionLockConn(ctx, conn, k, sfn, advisory.TxOptions(nil))`,
			"TxOptionsOnAcquire":     `_, _ = advisory.Acquire(ctx, db, k, advisory.TxOptions(nil))`,
			"HeartbeatOnLockerLease": `_, _ = lk.Acquire(ctx, k, advisory.Heartbeat(time.Second))`,
			"TxOptionsOnLockerLease": `_, _ = lk.Acquire(ctx, k, advisory.TxOptions(nil))`,
		},
		Placed: map[string]string{
			"WithXactLock":        `_ = advisory.WithXactLock(ctx, db, k, xfn, advisory.Try(), advisory.Wait(time.Second), advisory.WaitSlice(time.Second), advisory.Shared(), advisory.WithObserver(nil), advisory.TxOptions(nil))`,
			"WithXactLockTx":      `_ = advisory.WithXactLockTx(ctx, tx, k, xfn, advisory.Try(), advisory.Wait(time.Second), advisory.WaitSlice(time.Second), advisory.Shared(), advisory.WithObserver(nil))`,
			"WithSessionLock":     `_ = advisory.WithSessionLock(ctx, db, k, sfn, advisory.Try(), advisory.Wait(time.Second), advisory.Shared(), advisory.Heartbeat(time.Second))`,
			"WithSessionLockConn": `_ = advisory.WithSessionLockConn(ctx, conn, k, sfn, advisory.Wait(time.Second), advisory.Heartbeat(time.Second))`,
			"Acquire":             `_, _ = advisory.Acquire(ctx, db, k, advisory.Try(), advisory.Wait(time.Second), advisory.Shared(), advisory.Heartbeat(time.Second), advisory.Fencing())`,
			"LockerAcquire":       `_, _ = lk.Acquire(ctx, k, advisory.Try(), advisory.Wait(time.Second), advisory.Shared(), advisory.Fencing())`,
		},
	}.Run(t)
}
