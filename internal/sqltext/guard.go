package sqltext

import "strconv"

// A lock is real only on a primary, on a backend that no one else's lease
// holds. Advisory locks are per server, so one taken on a hot standby
// excludes no one on the primary. And a backend that a lease holds a key
// on grants that key again to anyone whose statement lands there, since
// a backend's own locks never conflict: behind a transaction pooler, which
// hands each client's transaction to whichever backend is free, another
// client's transaction lands on the lease's backend and takes the key by
// stacking on the lease's lock. A lease leaves its mark on its session
// ([LeaseStart]), so a statement that finds a mark it did not set is on a
// shared backend.
//
// So the statements that take a lock first refuse, in the same statement,
// as Guard says, and take nothing: a refusal raises an error of its own
// SQLSTATE ([StandbyState], [SharedState]), which is rare, so that the
// answer of a lock that was checked stays its rows, as before. Checking
// reads a flag in shared memory and a setting, and sends nothing more.

// Guard says what a statement that takes a lock checks before it takes
// it: [Guarded], or [OwnMark] for a call that runs for a lease.
type Guard struct {
	own  bool  // the call runs for a lease
	mark int64 // that lease's mark
}

// Guarded refuses on a hot standby and on a session that bears a lease's
// mark: the statement runs for a caller that holds no lease on the
// session.
var Guarded = Guard{}

// OwnMark returns the guard of a call that runs for a lease whose mark is
// mark: it refuses on a hot standby, and on a session that bears another
// mark than mark, as behind a transaction pooler that sent the call to
// another lease's backend. A session that bears the lease's own mark, or
// none, takes the lock.
func OwnMark(mark int64) Guard { return Guard{own: true, mark: mark} }

// The SQLSTATEs a guarded statement fails with when it refuses. Each is
// raised by a call that can raise nothing else there: lock_timeout set to
// -1 (invalid_parameter_value), and a setting with no such name
// (undefined_object).
const (
	StandbyState = "22023" // the server is a hot standby
	SharedState  = "42704" // the session bears another lease's mark
)

// inRecovery is true on a hot standby.
const inRecovery = "pg_catalog.pg_is_in_recovery()"

// marked is true when the session bears a lease's mark, and NULL or false
// otherwise: a session that never had one has no such setting, and
// current_setting then returns NULL; a released lease leaves it empty.
const marked = "pg_catalog.length(pg_catalog.current_setting('" + markSetting + "', true)) > 0"

// The calls that raise a refusal: see [StandbyState] and [SharedState].
const (
	raiseStandby = "pg_catalog.set_config('lock_timeout', '-1', true) IS NULL"
	raiseShared  = "pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL"
)

// guarded renders call, a boolean SQL expression that takes a lock, behind
// g's checks: a CASE, whose branches run in order, so that nothing is
// taken once a refusal has been found:
//
//	CASE WHEN pg_catalog.pg_is_in_recovery() THEN
//	pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN
//	pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease',
//	true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '',
//	true) IS NULL ELSE call END
func guarded(g Guard, call string) string { return guardPrefix(g) + call + " END" }

// guardPrefix is [guarded] up to its call. A lease's own call refuses on
// a session that bears another mark than the lease's:
//
//	CASE WHEN pg_catalog.pg_is_in_recovery() THEN ... WHEN
//	pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease',
//	true)) > 0 AND pg_catalog.current_setting('pgadvisory.lease', true)
//	<> '8177' THEN ... ELSE
func guardPrefix(g Guard) string {
	refuse := marked
	if g.own {
		refuse += " AND pg_catalog.current_setting('" + markSetting + "', true) <> '" + strconv.FormatInt(g.mark, 10) + "'"
	}
	return "CASE WHEN " + inRecovery + " THEN " + raiseStandby + " WHEN " + refuse + " THEN " + raiseShared + " ELSE "
}

// check renders g's checks as a select-list entry of their own, NULL when
// nothing refuses, for a statement that waits: its entries run left to
// right, so the check comes before the waits.
func check(g Guard) string { return guarded(g, "NULL") }

// tryPrefix is the beginning of a try guarded by g, up to the try's own
// call, and trySuffix ends it. The Guarded one, which nearly every call
// takes, is made once.
func tryPrefix(g Guard) string {
	if g == Guarded {
		return guardedTryPrefix
	}
	return "SELECT 1 WHERE " + guardPrefix(g)
}

var guardedTryPrefix = "SELECT 1 WHERE " + guardPrefix(Guarded)

const trySuffix = " END"

// ClearMark is the select-list entry that removes a lease's mark from its
// session, so that the session can serve other callers once the lease has
// ended.
const ClearMark = "pg_catalog.set_config('" + markSetting + "', '', false)"

// ClearStaleMark is the statement that removes a mark that no lease holds
// any more, so that the backend serves other callers again. A mark is
// live only beside its lease's lock: a lease's backend holds the lease's
// key from before its mark is set until after it is removed, and a
// Locker's carrier is a session of its own. So a backend that bears a
// mark and holds no advisory lock at all bears a stale one, which the
// statement removes, affecting one row; elsewhere it does nothing, and
// affects none:
//
//	SELECT 1 WHERE CASE WHEN pg_catalog.length(pg_catalog.current_setting(
//	'pgadvisory.lease', true)) > 0 AND NOT EXISTS (SELECT 1 FROM
//	pg_catalog.pg_locks WHERE locktype = 'advisory' AND pid =
//	pg_catalog.pg_backend_pid()) THEN pg_catalog.set_config(
//	'pgadvisory.lease', '', false) IS NOT NULL ELSE false END
//
// A mark goes stale when the statement that releases a lease fails after
// its unlock ran: a session lock's release is not undone with the failed
// statement, but the removal of the mark is. Behind a transaction
// pooler such a backend goes back to the pool, where it refuses every
// guarded call that lands on it, until the pooler closes it. A call
// refused for a mark sends this statement, and tries again once when it
// removed one (see internal/scope's guard.go). Its scan of pg_locks runs
// only then, never on a call that is not refused.
const ClearStaleMark = "SELECT 1 WHERE CASE WHEN " + marked +
	" AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_locks WHERE locktype = 'advisory' AND pid = pg_catalog.pg_backend_pid())" +
	" THEN " + ClearMark + " IS NOT NULL ELSE false END"
