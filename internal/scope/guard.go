package scope

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// Every statement that takes a lock refuses on a hot standby and on a
// session that bears a lease's mark (see internal/sqltext's guard.go). A
// lease's own calls are the exception: its session bears its own mark,
// and a lock taken there on another key is the caller's to take, so they
// refuse only a session that bears another mark than the lease's. The
// calls that run for a lease are known by the session, when they are
// made on the lease's *sql.Conn, and otherwise by the context, when it
// descends from the lease's (the fn of a session scope, or
// [Lease.Context]).

// markedSessions holds the [Session]s on which a lease of this process has
// left its mark; marks counts them, so that a process without a lease on
// a caller's session looks nothing up. A database/sql session is its
// [SQLConn], which is its *sql.Conn under another type.
var (
	markedSessions sync.Map
	marks          atomic.Int64
)

// ownMarkKey is the context key that tells a call runs for a lease.
type ownMarkKey struct{}

// withOwnMark returns ctx, marked as running for a lease whose mark, mark,
// is on its session.
func withOwnMark(ctx context.Context, mark int64) context.Context {
	return context.WithValue(ctx, ownMarkKey{}, mark)
}

// holdMark records that a lease has left its mark on session s, and
// dropMark that it has ended; a lease on a connection of its own records
// nothing, since no caller makes calls on that connection but through the
// lease's context.
func holdMark(s Session, mark int64) {
	if _, loaded := markedSessions.LoadOrStore(s, mark); !loaded {
		marks.Add(1)
	}
}

func dropMark(s Session) {
	if _, loaded := markedSessions.LoadAndDelete(s); loaded {
		marks.Add(-1)
	}
}

// SessionGuard returns what a lock call on s, under ctx, checks before it
// takes a lock: everything, unless the call runs for a lease of s's, when
// only another mark than that lease's refuses.
func SessionGuard(ctx context.Context, s Session) sqltext.Guard {
	if marks.Load() > 0 && s != nil {
		if mark, ok := markedSessions.Load(s); ok {
			return sqltext.OwnMark(mark.(int64))
		}
	}
	return TxGuard(ctx)
}

// ConnGuard is [SessionGuard] on conn's session.
func ConnGuard(ctx context.Context, conn *sql.Conn) sqltext.Guard {
	return SessionGuard(ctx, SQLConn(conn))
}

// TxGuard returns what a lock call on a transaction, under ctx, checks:
// everything, unless ctx descends from a lease's, when only another mark
// than that lease's refuses: the transaction may run on the lease's own
// session, or on another, which bears no mark unless a transaction
// pooler sent it to another lease's backend.
func TxGuard(ctx context.Context) sqltext.Guard {
	if mark, ok := ctx.Value(ownMarkKey{}).(int64); ok {
		return sqltext.OwnMark(mark)
	}
	return sqltext.Guarded
}

// refusal returns the refusal that err, a lock statement's failure,
// reports (see internal/sqltext's guard.go): ErrStandby, ErrSharedSession, or
// nil for any other failure.
func refusal(err error) error {
	switch SQLState(err) {
	case sqltext.StandbyState:
		return ErrStandby
	case sqltext.SharedState:
		return ErrSharedSession
	}
	return nil
}

// A backend may bear a stale mark: a lease's release that failed after
// its unlock ran leaves the mark, and behind a transaction pooler that
// backend goes back to the pool (see [sqltext.ClearStaleMark]). A call
// refused for a mark therefore asks the server to remove a stale one, and
// tries once more if it did: the refusal and the statement run only on
// that rare path, and a live lease's mark, which sits beside its lock,
// stays.

// healMark removes a stale mark from s's backend, within
// [reclaimTimeout], and reports whether there was one.
func healMark(ctx context.Context, s Querier) bool {
	ctx, cancel := context.WithTimeout(ctx, reclaimTimeout)
	defer cancel()
	n, err := run(ctx, s, sqltext.ClearStaleMark)
	return err == nil && n == 1
}

// HealMark is [healMark], for a front end whose transaction scope was
// refused for a mark (see [RefusedForMark]): s is a session of the
// scope's pool, taken once the scope's transaction has ended.
func HealMark(ctx context.Context, s Querier) bool { return healMark(ctx, s) }

// RefusedForMark reports whether err, a lock call's failure, is a refusal
// for a mark on its session, after which [HealMark] may let the call go
// on, while ctx goes on.
func RefusedForMark(ctx context.Context, err error) bool { return refusedForMark(ctx, err) }

// healPool removes a stale mark from a backend of p's, through a
// connection of its own, as a transaction scope refused for a mark does
// once its transaction has ended: behind a transaction pooler, which
// hands out the backend freed last, the statement lands on the one that
// refused. It reports whether there was one.
func healPool(ctx context.Context, p Pool) bool {
	conn, err := p.Conn(ctx)
	if err != nil {
		return false
	}
	defer conn.Close()
	return healMark(ctx, SQLConn(conn))
}

// refusedForMark reports whether err is a lock call's refusal for a mark
// on its session, after which healing may let the call go on: the
// server's error (SQLSTATE [sqltext.SharedState]), or the call's own that
// reports it.
func refusedForMark(ctx context.Context, err error) bool {
	return ctx.Err() == nil && (errors.Is(err, errForeignMark) || SQLState(err) == sqltext.SharedState)
}

// healed runs try, a lock call on s's session; when it is refused for a
// mark that [healMark] then finds stale and removes, it runs try once more.
func healed[T any](ctx context.Context, s Querier, try func() (T, error)) (T, error) {
	v, err := try()
	if refusedForMark(ctx, err) && healMark(ctx, s) {
		v, err = try()
	}
	return v, err
}

// errForeignMark is the cause of ErrSharedSession when a lock call found another
// lease's mark on its session.
var errForeignMark = errors.New("the session bears the mark of a lease that another client holds on it")

// refusedError is a slice's refusal, which ends a wait holding nothing.
type refusedError struct{ err error }

func (e refusedError) Error() string { return e.err.Error() }
func (e refusedError) Unwrap() error { return e.err }

// FailBegin reports a BEGIN that failed for a transaction scope on keys. A
// hot standby refuses a read-write transaction at its BEGIN (SQLSTATE
// 0A000, as lib/pq begins one by default), before any lock is tried, and
// that is reported as [ErrStandby], as the lock statement would have.
func FailBegin(ctx context.Context, keys string, err error) error {
	if SQLState(err) == "0A000" && ctx.Err() == nil {
		return FailKind("begin", keys, ErrStandby, err)
	}
	return Fail(ctx, "begin", "", err)
}
