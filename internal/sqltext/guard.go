package sqltext

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
// it.
type Guard uint8

const (
	// Guarded refuses on a hot standby and on a session that bears a
	// lease's mark: the statement runs for a caller that holds no lease
	// on the session.
	Guarded Guard = iota
	// OwnMark refuses on a hot standby only: the caller holds a lease on
	// the session, whose mark is its own.
	OwnMark
)

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

// guardPrefix is [guarded] up to its call.
func guardPrefix(g Guard) string {
	if g == OwnMark {
		return "CASE WHEN " + inRecovery + " THEN " + raiseStandby + " ELSE "
	}
	return "CASE WHEN " + inRecovery + " THEN " + raiseStandby + " WHEN " + marked + " THEN " + raiseShared + " ELSE "
}

// check renders g's checks as a select-list entry of their own, NULL when
// nothing refuses, for a statement that waits: its entries run left to
// right, so the check comes before the waits.
func check(g Guard) string { return guarded(g, "NULL") }

// tryPrefixes are the beginnings of a try, by guard, up to the try's own
// call, and trySuffix ends it.
var tryPrefixes = [2]string{
	Guarded: "SELECT 1 WHERE " + guardPrefix(Guarded),
	OwnMark: "SELECT 1 WHERE " + guardPrefix(OwnMark),
}

const trySuffix = " END"

// ClearMark is the select-list entry that removes a lease's mark from its
// session, so that the session can serve other callers once the lease has
// ended.
const ClearMark = "pg_catalog.set_config('" + markSetting + "', '', false)"
