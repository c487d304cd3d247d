package advisory

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"time"
)

// execer is what *sql.Conn and *sql.Tx have in common.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// run sends one statement and returns how many rows it affected, which is
// how every boolean answer comes back (see internal/sqltext). A nil error
// while ctx is done is not trusted: a driver can report success for a wait
// whose context expired as it ended, after it dropped the session, so run
// reports ctx's error instead.
func run(ctx context.Context, e execer, query string) (int64, error) {
	res, err := e.ExecContext(ctx, query)
	if err == nil {
		if err = ctx.Err(); err == nil {
			return res.RowsAffected()
		}
	}
	return 0, err
}

// discard closes the session behind conn instead of returning it to the
// pool, so that any lock it may hold ends with it. Closing a *sql.Conn
// would return the session, locks and all; only a Raw callback that reports
// driver.ErrBadConn makes database/sql close the driver connection. After
// discard, conn reports sql.ErrConnDone.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
}

// releaseTimeout bounds an unlock that runs after the caller's context was
// cancelled.
const releaseTimeout = 10 * time.Second

// releaseContext returns a context for releasing locks: it keeps ctx's
// values but not its cancellation, so a cancelled caller still releases,
// and it ends after releaseTimeout.
func releaseContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
}
