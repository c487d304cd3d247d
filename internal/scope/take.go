package scope

import (
	"context"
	"database/sql"
	"slices"
	"time"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// Take takes session locks on keys on conn as operation op, as o says
// (Try, Timeout, Shared, WaitSlice), and reports whether it took them. A
// try (one key) is one statement, in form f. A wait is a series of slices
// (see [waitInSlices]), the first of which is bounded by the session's own
// lock_timeout and statement_timeout without reading them first: it is the
// whole of an uncontended wait, one round trip, and a busy key's waiter
// sends nothing before the statement that waits, so that it joins the
// queue at once. On an error after which the
// session may hold a lock it did not report, the session is discarded; a
// wait that ran out holds nothing, and keeps it.
func Take(ctx context.Context, h Hooks, conn *sql.Conn, op string, keys []sqltext.Key, o *Options, f sqltext.Form) (bool, error) {
	if conn == nil {
		return false, ErrNilConn
	}
	start := time.Now()
	acquired, err := take(ctx, conn, op, keys, o, f, start)
	if h != nil {
		// A copy, so that keys stays on the caller's stack when nothing
		// is observed.
		h.Acquired(ctx, op, slices.Clone(keys), time.Since(start), acquired, err)
	}
	return acquired, err
}

// take is Take, unobserved.
func take(ctx context.Context, conn *sql.Conn, op string, keys []sqltext.Key, o *Options, f sqltext.Form, start time.Time) (bool, error) {
	if err := CheckSession(ctx, conn, op, KeyList(keys)); err != nil {
		return false, err
	}
	g := ConnGuard(ctx, conn)
	if o.Try {
		stmt := sqltext.TryLockStmt(f, g, false, o.Shared, keys[0])
		n, err := Run(ctx, conn, stmt.Query, stmt.Args...)
		if err != nil {
			Discard(conn)
			return false, FailWait(ctx, op, KeyList(keys), err)
		}
		return Tried(n, op, KeyList(keys))
	}
	w := waitInSlices(ctx, start, o, op, KeyList(keys), false,
		func(ctx context.Context) (waitSettings, error) { return readWaitSettings(ctx, conn) },
		func(ctx context.Context, n int, ms int64) error {
			var stmt sqltext.Stmt
			switch {
			case n == 0 && len(keys) == 1:
				stmt = sqltext.FirstSessionSliceStmt(f, g, o.Shared, ms, keys[0])
			case n == 0:
				stmt = sqltext.Plain(sqltext.FirstSessionSlice(g, o.Shared, ms, keys...))
			case len(keys) == 1:
				stmt = sqltext.SessionSliceStmt(f, g, o.Shared, ms, keys[0])
			default:
				stmt = sqltext.Plain(sqltext.SessionSlice(g, o.Shared, ms, keys...))
			}
			rows, err := Run(ctx, conn, stmt.Query, stmt.Args...)
			if err == nil && rows == 0 {
				return refusal(ctx, conn, g, op, KeyList(keys))
			}
			return err
		})
	if w.doubt {
		Discard(conn)
	}
	return w.err == nil, w.err
}
