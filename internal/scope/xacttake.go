package scope

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// XactTake takes transaction locks on keys in tx as operation op, as o
// says, and reports whether it took them. A single key is tried first, in
// form f, which is the whole of a try and of an uncontended wait: one
// round trip. A busy key, or several keys, are waited for in slices (see
// [waitInSlices]):
//
//   - With owned false, tx is the caller's, and each slice runs under a
//     savepoint: a wait that runs out rolls back to it and releases it,
//     and leaves tx as it was.
//   - With owned true, the scope began tx with o.TxOpts and nothing of the
//     caller's has run in it: each slice ends the transaction and begins
//     another on the same connection, in the same message, so that each
//     runs in a transaction of its own and not even the snapshot that
//     REPEATABLE READ takes for a whole transaction outlives a slice.
//
// On an error the caller rolls tx back, which ends any lock that was
// granted as the error arose.
func XactTake(ctx context.Context, h Hooks, tx Tx, owned bool, op string, keys []sqltext.Key, o *Options, f sqltext.Form) (bool, error) {
	if tx == nil {
		return false, ErrNilTx
	}
	start := time.Now()
	w := xactWait{tx: tx, owned: owned, keys: keys, o: o}
	acquired, err := w.take(ctx, op, f, start)
	if h != nil {
		h.Acquired(ctx, op, slices.Clone(keys), time.Since(start), acquired, err)
	}
	return acquired, err
}

// xactWait is a wait for transaction locks.
type xactWait struct {
	tx        Tx
	owned     bool
	keys      []sqltext.Key
	o         *Options
	savepoint bool // a slice ran under the wait's savepoint, which may have failed
}

func (w *xactWait) take(ctx context.Context, op string, f sqltext.Form, start time.Time) (bool, error) {
	if err := checkXact(ctx, w.tx, op, KeyList(w.keys)); err != nil {
		return false, err
	}
	g := TxGuard(ctx)
	if len(w.keys) == 1 {
		stmt := sqltext.TryLockStmt(f, g, true, w.o.Shared, w.keys[0])
		n, err := run(ctx, w.tx, stmt.Query, stmt.Args...)
		if err != nil {
			return false, FailWait(ctx, op, KeyList(w.keys), err)
		}
		if n > 0 || w.o.Try {
			return n > 0, nil
		}
	}
	begin := ""
	if w.owned {
		var err error
		if begin, err = beginStatement(w.o.TxOpts); err != nil {
			return false, FailKind(op, KeyList(w.keys), err, nil)
		}
	}
	out := waitInSlices(ctx, start, w.o, op, KeyList(w.keys), len(w.keys) == 1, w.settings,
		func(ctx context.Context, n int, ms int64, set waitSettings) error {
			var slice string
			if len(w.keys) == 1 {
				slice = sqltext.GuardedXactKeySlice(g, w.o.Shared, ms, set.lock.Milliseconds(), w.keys[0])
			} else {
				slice = sqltext.GuardedXactSlice(g, w.o.Shared, ms, w.keys...)
			}
			switch {
			case w.owned && (n > 0 || len(w.keys) == 1):
				// The transaction ran a slice that failed, or the
				// try, whose snapshot REPEATABLE READ keeps.
				slice = sqltext.InNewTransaction(begin, slice)
			case !w.owned:
				slice = sqltext.InSavepoint(w.savepoint, slice)
				w.savepoint = true
			}
			_, err := run(ctx, w.tx, slice)
			if refusal(err) != nil && ctx.Err() == nil {
				return w.refused(ctx, begin, op, err)
			}
			return err
		})
	if out.err != nil && !out.doubt && w.savepoint {
		// The wait ran out: leave the caller's transaction as it was.
		if _, err := w.tx.Exec(ctx, sqltext.LeaveWaitSavepoint); err != nil {
			return false, Join(out.err, Fail(ctx, op, KeyList(w.keys), err))
		}
	}
	return out.err == nil, out.err
}

// refused ends a slice that refused with err, which took nothing, and
// returns the refusal's error: the transaction is then as it was before
// the wait (a caller's), or a fresh one (the wait's own).
func (w *xactWait) refused(ctx context.Context, begin, op string, err error) error {
	_, endErr := w.tx.Exec(ctx, sqltext.EndRefusedSlice(w.savepoint, begin))
	w.savepoint = false
	if endErr != nil {
		return Fail(ctx, op, KeyList(w.keys), endErr)
	}
	return refusedError{FailWait(ctx, op, KeyList(w.keys), err)}
}

// settings reads the session's settings. After a slice ran out, which left
// the transaction aborted, it first rolls back to the savepoint in a
// caller's transaction, or begins the next transaction of an owned wait.
func (w *xactWait) settings(ctx context.Context) (waitSettings, error) {
	if w.savepoint {
		if _, err := w.tx.Exec(ctx, sqltext.RollbackToWaitSavepoint); err != nil {
			return waitSettings{}, err
		}
	}
	return readWaitSettings(ctx, w.tx)
}

// beginStatement renders the BEGIN that starts a transaction as opts say.
func beginStatement(opts *sql.TxOptions) (string, error) {
	if opts == nil {
		return "BEGIN", nil
	}
	begin := "BEGIN"
	switch sql.IsolationLevel(opts.Isolation) {
	case sql.LevelDefault:
	case sql.LevelReadUncommitted:
		begin += " ISOLATION LEVEL READ UNCOMMITTED"
	case sql.LevelReadCommitted:
		begin += " ISOLATION LEVEL READ COMMITTED"
	case sql.LevelRepeatableRead:
		begin += " ISOLATION LEVEL REPEATABLE READ"
	case sql.LevelSerializable:
		begin += " ISOLATION LEVEL SERIALIZABLE"
	default:
		return "", fmt.Errorf("%w: isolation level %v has no PostgreSQL equivalent", ErrBadOption, opts.Isolation)
	}
	if opts.ReadOnly {
		begin += " READ ONLY"
	}
	return begin, nil
}
