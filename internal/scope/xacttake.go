package scope

import (
	"context"
	"database/sql"
	"slices"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// BeginFunc begins a transaction like the one a transaction scope began,
// for a wait that starts its transaction again.
type BeginFunc func(context.Context) (*sql.Tx, error)

// XactTake takes transaction locks on keys in tx as operation op, as o
// says, and reports whether it took them, and in which transaction. A
// single key is tried first, in form f, which is the whole of a try and of
// an uncontended wait: one round trip. A busy key, or several keys, are
// waited for in slices (see [waitInSlices]):
//
//   - With begin nil, tx is the caller's, and each slice runs under a
//     savepoint, so that one that runs out leaves tx as it was.
//   - Otherwise the scope began tx and nothing has run in it: the wait
//     rolls it back and runs each slice in a transaction that begin starts,
//     so that not even the snapshot that REPEATABLE READ takes for a
//     whole transaction outlives a slice. The transaction returned is the
//     one that holds the locks, or the last one begun.
//
// On an error the caller rolls the returned transaction back, which ends
// any lock that was granted as the error arose.
func XactTake(ctx context.Context, h Hooks, tx *sql.Tx, begin BeginFunc, op string, keys []sqltext.Key, o *Options, f sqltext.Form) (*sql.Tx, bool, error) {
	if tx == nil {
		return nil, false, ErrNilTx
	}
	start := time.Now()
	w := xactWait{tx: tx, begin: begin, keys: keys, shared: o.Shared, form: f}
	acquired, err := w.take(ctx, op, o, f, start)
	if h != nil {
		h.Acquired(ctx, op, slices.Clone(keys), time.Since(start), acquired, err)
	}
	return w.tx, acquired, err
}

// xactWait is a wait for transaction locks.
type xactWait struct {
	tx     *sql.Tx
	begin  BeginFunc
	keys   []sqltext.Key
	shared bool
	form   sqltext.Form // the form of a slice of one key in a transaction of the wait's own
	fresh  bool         // tx was begun for the next slice and has run nothing that failed
}

func (w *xactWait) take(ctx context.Context, op string, o *Options, f sqltext.Form, start time.Time) (bool, error) {
	if len(w.keys) == 1 {
		stmt := sqltext.TryLockStmt(f, true, w.shared, w.keys[0])
		n, err := Run(ctx, w.tx, stmt.Query, stmt.Args...)
		if err != nil {
			return false, FailWait(ctx, op, KeyList(w.keys), err)
		}
		if n > 0 || o.Try {
			return n > 0, nil
		}
	} else {
		// Nothing has run in tx yet: no need to start it again.
		w.fresh = true
	}
	out := waitInSlices(ctx, start, o, op, KeyList(w.keys), w.settings, w.slice)
	return out.err == nil, out.err
}

// slice runs slice n, of ms milliseconds.
func (w *xactWait) slice(ctx context.Context, n int, ms int64) error {
	stmt := sqltext.Plain(sqltext.XactSlice(w.shared, ms, w.keys...))
	switch {
	case w.begin == nil:
		// One message of three statements, which only the simple query
		// protocol carries: the key goes in the text.
		stmt.Query = sqltext.InSavepoint(n > 0, stmt.Query)
	case len(w.keys) == 1:
		stmt = sqltext.XactSliceStmt(w.form, w.shared, ms, w.keys[0])
	}
	if w.begin != nil {
		if err := w.restart(ctx); err != nil {
			return err
		}
	}
	w.fresh = false
	_, err := Run(ctx, w.tx, stmt.Query, stmt.Args...)
	return err
}

// restart ends the wait's transaction and begins another, unless the one
// it has is fresh.
func (w *xactWait) restart(ctx context.Context) error {
	if w.fresh {
		return nil
	}
	_ = w.tx.Rollback()
	tx, err := w.begin(ctx)
	if err != nil {
		return err
	}
	w.tx, w.fresh = tx, true
	return nil
}

// settings reads the session's settings after a slice ran out, which left
// the transaction aborted: it rolls back to the savepoint in a caller's
// transaction, or begins the next transaction of the wait.
func (w *xactWait) settings(ctx context.Context) (waitSettings, error) {
	if w.begin == nil {
		if _, err := w.tx.ExecContext(ctx, sqltext.RollbackToWaitSavepoint); err != nil {
			return waitSettings{}, err
		}
	} else if err := w.restart(ctx); err != nil {
		return waitSettings{}, err
	}
	return readWaitSettings(ctx, w.tx)
}
