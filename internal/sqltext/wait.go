package sqltext

import "strconv"

// The statements of a wait in slices. A statement that waits for a lock
// keeps the snapshot it started with for as long as it waits, which holds
// back VACUUM and CREATE INDEX CONCURRENTLY. So a wait is a series of
// statements, each bounded by lock_timeout, and none holds a snapshot for
// longer than its slice.
//
// A slice takes the keys as transaction locks first. A lock_timeout can
// fail the statement in the same instant that the server grants the lock,
// and a transaction lock granted so ends with the statement's transaction.
// A session slice then takes the session locks as well, which the server
// grants at once to a session that holds the key already; they outlive the
// statement, and the transaction locks end with it.

// WaitSettings returns one row: the session's lock_timeout,
// statement_timeout and deadlock_timeout, as current_setting shows them,
// and whether a transaction block is open on the session, which a
// statement outside one, its own transaction, sees by its start being its
// transaction's.
const WaitSettings = "SELECT pg_catalog.current_setting('lock_timeout'), " +
	"pg_catalog.current_setting('statement_timeout'), pg_catalog.current_setting('deadlock_timeout'), " +
	"pg_catalog.statement_timestamp() <> pg_catalog.transaction_timestamp()"

// DirectSliceStmt returns one slice of a wait for a session lock on key,
// on a session with no transaction block open, in form f: it waits at
// most ms milliseconds for the session lock itself, then fails with
// SQLSTATE 55P03:
//
//	SELECT pg_catalog.set_config('lock_timeout', '1000', true), CASE WHEN
//	... END, pg_catalog.pg_advisory_lock(42)
//
// One select list, which runs left to right: the bound, the guard (see
// [SessionSlice]), and the wait, the last thing the server does before it
// answers. Outside a transaction block the statement is its own
// transaction, so the bound ends with it and needs no putting back; any
// work after the grant, even that one call, measurably slows the handoff
// of a freed key. The price is the race that [SessionSliceStmt] closes: a
// lock_timeout that fires as the lock is granted fails the statement
// with the lock held, since a session lock outlives a failed statement.
// So a slice that fails with 55P03 is followed by [HeldHere], which tells
// whether it holds the key after all; a session that waits does not hold
// it before, since its own locks never make it wait.
//
// In the Params form the bound is $1 and the key $2 (or $2 and $3).
func DirectSliceStmt(f Form, g Guard, shared bool, ms int64, key Key) Stmt {
	if f != Params {
		return Plain(directSlice(g, shared, quoted(ms), "("+key.args()+")"))
	}
	texts := directSliceTexts[b2i(shared)]
	if g != Guarded {
		texts = [2]string{directSlice(g, shared, "$1", sliceParamArgs[0]), directSlice(g, shared, "$1", sliceParamArgs[1])}
	}
	return sliceParams(texts, ms, key)
}

// directSlice renders [DirectSliceStmt]'s statement from SQL of its bound
// and the key's argument list.
func directSlice(g Guard, shared bool, bound, args string) string {
	return "SELECT pg_catalog.set_config('lock_timeout', " + bound + ", true), " + check(g) + ", " +
		fn("pg_advisory", false, shared) + args
}

// HeldHere returns the statement that tells whether the session holds key
// in mode: it affects one row if so, and none otherwise. It follows a
// [DirectSliceStmt] that ran out, whose lock may have been granted as it
// did. In the Params form, classid and objid are $1 and $2, as in
// [LeaseStart]:
//
//	SELECT 1 FROM pg_catalog.pg_locks WHERE locktype = 'advisory' AND pid =
//	pg_catalog.pg_backend_pid() AND classid = ... AND granted
func HeldHere(f Form, shared bool, key Key) Stmt {
	const pid = "pg_catalog.pg_backend_pid()"
	const prefix = "SELECT 1 FROM pg_catalog.pg_locks WHERE "
	if f != Params {
		return Plain(prefix + heldBy(pid, shared, key))
	}
	c, o, _ := key.tag()
	return Stmt{Query: prefix + heldAs(pid, shared, key, "$1", "$2"), Args: []any{int64(c), int64(o)}}
}

// SessionSlice returns one slice of a wait for session locks on keys, in
// the order given: it waits at most ms milliseconds, then fails with
// SQLSTATE 55P03 holding nothing it took:
//
//	SELECT pg_catalog.set_config('lock_timeout', t.prev, true) FROM (SELECT
//	pg_catalog.current_setting('lock_timeout') AS prev,
//	pg_catalog.set_config('lock_timeout', '1000', true), CASE WHEN ... END,
//	(SELECT pg_catalog.count(*) FROM (SELECT pg_catalog.pg_advisory_xact_lock(k)
//	FROM (VALUES (1), (2)) AS k(k)) AS l),
//	(SELECT pg_catalog.count(*) FROM (SELECT pg_catalog.pg_advisory_lock(k)
//	FROM (VALUES (1), (2)) AS k(k)) AS l) OFFSET 0) AS t
//
// It serves a wait for several keys, whose first slice is sent before
// the session's settings are read, and so puts back the lock_timeout it
// finds (see boundedBy); a wait for one key reads them first and sends
// [SessionSliceStmt]. The keys are rows of VALUES lists, because a scan
// looks for interrupts before each row: the server can grant a
// transaction lock as lock_timeout fires and raise the timeout only at
// its next look, and that look must come before the session locks, not
// after them, or the failed statement would leave them held.
//
// The slice is guarded by g: where [TryLock] would refuse, it fails with
// the refusal's SQLSTATE before it waits or takes anything (see
// guard.go). Session locks are the ones a transaction pooler shares, and
// each slice runs as a transaction of its own, which the pooler may send
// to any backend.
func SessionSlice(g Guard, shared bool, ms int64, keys ...Key) string {
	return boundedBy(quoted(ms), check(g)+", "+scanned(true, shared, keys)+", "+scanned(false, shared, keys))
}

// SessionSliceStmt returns one slice of a wait for a session lock on key,
// in form f: it waits at most ms milliseconds, then fails with SQLSTATE
// 55P03 holding nothing it took. prev is the session's lock_timeout, in
// milliseconds, which the slice puts back:
//
//	SELECT pg_catalog.set_config('lock_timeout', '1000', true), CASE WHEN ...
//	END, pg_catalog.pg_advisory_xact_lock(42), pg_catalog.pg_sleep(0),
//	pg_catalog.set_config('lock_timeout', '0', true),
//	pg_catalog.pg_advisory_lock(42)
//
// One select list, which runs left to right: the bound, the guard (see
// [SessionSlice]), the wait for the transaction lock, then the session
// lock, which the server grants at once to a session that holds the key
// already. pg_sleep(0) looks for interrupts before it returns, so that a
// lock_timeout that fired as the transaction lock was granted fails the
// statement there, before the session lock is taken. After it, nothing
// waits, so the setting goes back before the session lock. The bound is
// local to the statement's transaction, and so gone with it outside a
// transaction block; put back, it is gone inside one as well.
//
// In the Params form the bound is $1, the setting put back $2 and the key
// $3 (or $3 and $4), so that the text is the same for every slice and
// key, and pgx prepares it once per connection.
func SessionSliceStmt(f Form, g Guard, shared bool, ms, prev int64, key Key) Stmt {
	if f != Params {
		return Plain(keySlice(g, shared, quoted(ms), quoted(prev), "("+key.args()+")"))
	}
	texts := sessionSliceTexts[b2i(shared)]
	if g != Guarded {
		texts = keySliceTexts(g, shared)
	}
	bound, back := strconv.FormatInt(ms, 10), strconv.FormatInt(prev, 10)
	if key.Pair {
		return Stmt{Query: texts[1], Args: []any{bound, back, key.A, key.B}}
	}
	return Stmt{Query: texts[0], Args: []any{bound, back, key.Bigint}}
}

// keySlice renders [SessionSliceStmt]'s statement from SQL of its bound,
// the setting it puts back, and the key's argument list.
func keySlice(g Guard, shared bool, bound, prev, args string) string {
	return flatSlice(g, bound, fn("pg_advisory", true, shared)+args+", pg_catalog.pg_sleep(0)", prev) +
		", " + fn("pg_advisory", false, shared) + args
}

// flatSlice renders the one select list of a slice for one key, up to its
// putting back the setting: lock_timeout set to bound, g's checks, wait,
// and lock_timeout set to prev, each an SQL expression.
func flatSlice(g Guard, bound, wait, prev string) string {
	return "SELECT pg_catalog.set_config('lock_timeout', " + bound + ", true), " + check(g) + ", " +
		wait + ", pg_catalog.set_config('lock_timeout', " + prev + ", true)"
}

// keySliceTexts returns the Params form of [SessionSliceStmt] guarded by
// g, for a bigint key and for a pair.
func keySliceTexts(g Guard, shared bool) [2]string {
	return [2]string{keySlice(g, shared, "$1", "$2", "($3)"), keySlice(g, shared, "$1", "$2", "($3,$4)")}
}

// quoted renders ms as an SQL string literal.
func quoted(ms int64) string { return "'" + strconv.FormatInt(ms, 10) + "'" }

// XactSlice returns one slice of a wait for transaction locks on keys: it
// waits at most ms milliseconds, then fails with SQLSTATE 55P03. In a
// transaction block, that failure aborts the transaction: see
// [InSavepoint]. Outside one, the statement is its own transaction, and
// it waits until the keys are free, takes them and lets them go.
func XactSlice(shared bool, ms int64, keys ...Key) string {
	return boundedBy(quoted(ms), locks(true, shared, keys))
}

// GuardedXactSlice is [XactSlice] guarded by g: where [TryLock] would
// refuse, it fails with the refusal's SQLSTATE before it waits or takes
// anything, and [EndRefusedSlice] then ends it.
func GuardedXactSlice(g Guard, shared bool, ms int64, keys ...Key) string {
	return boundedBy(quoted(ms), check(g)+", "+locks(true, shared, keys))
}

// GuardedXactKeySlice is [GuardedXactSlice] for one key, on a session
// whose lock_timeout is prev milliseconds, which it puts back:
//
//	SELECT pg_catalog.set_config('lock_timeout', '1000', true), CASE WHEN ...
//	END, pg_catalog.pg_advisory_xact_lock(42),
//	pg_catalog.set_config('lock_timeout', '0', true)
//
// One select list, which runs left to right, as [SessionSliceStmt]'s
// does. A lock_timeout that fires as the lock is granted is raised at
// the statement's next look for interrupts, which the executor takes
// before it finds there is no second row: the statement fails, and the
// lock ends with what the failure rolls back.
func GuardedXactKeySlice(g Guard, shared bool, ms, prev int64, key Key) string {
	return flatSlice(g, quoted(ms), call(fn("pg_advisory", true, shared), key), quoted(prev))
}

// EndRefusedSlice returns the statement that ends a [GuardedXactSlice]
// that refused: in a transaction the caller began (savepoint), it rolls
// back to the wait's savepoint and releases it, which leaves the
// transaction as it was; in a transaction of the wait's own, it begins
// the next with begin, as [InNewTransaction] does.
func EndRefusedSlice(savepoint bool, begin string) string {
	if savepoint {
		return LeaveWaitSavepoint
	}
	return "ROLLBACK; " + begin
}

// locks renders the select-list entry that takes transaction locks on
// keys: the function call for one key, or [scanned] for several.
func locks(xact, shared bool, keys []Key) string {
	if len(keys) == 1 {
		return call(fn("pg_advisory", xact, shared), keys[0])
	}
	return scanned(xact, shared, keys)
}

// scanned renders the select-list entry that takes keys as rows of VALUES
// lists, and counts them.
func scanned(xact, shared bool, keys []Key) string {
	name := fn("pg_advisory", xact, shared)
	return "(SELECT pg_catalog.count(*) FROM (" + perKey("SELECT "+name+"(k) FROM ", "SELECT "+name+"(a,b) FROM ", "", keys) + ") AS l)"
}

// boundedBy renders the statement that runs the select-list entries waits
// with lock_timeout set to bound, an SQL expression of text, and then puts
// the setting back. The inner
// select list runs left to right: it saves the setting, bounds the wait,
// and waits; the outer one puts the saved setting back. So the bound
// covers this statement alone, inside a transaction or outside one, and
// the rest of a transaction runs with whatever it had before. OFFSET 0
// keeps the planner from merging the two levels.
func boundedBy(bound, waits string) string {
	return "SELECT pg_catalog.set_config('lock_timeout', t.prev, true) FROM (SELECT " +
		"pg_catalog.current_setting('lock_timeout') AS prev, pg_catalog.set_config('lock_timeout', " +
		bound + ", true), " + waits + " OFFSET 0) AS t"
}

// InNewTransaction returns slice run in a transaction of its own, in a
// transaction block that must go on: it ends the current transaction and
// begins another with begin ("BEGIN", or BEGIN with the block's isolation
// level and access mode), in one message, as [InSavepoint] does.
func InNewTransaction(begin, slice string) string {
	return "ROLLBACK; " + begin + "; " + slice
}

// WaitSavepoint names the savepoint under which a slice runs in a
// transaction the caller began.
const WaitSavepoint = "pgadvisory_wait"

// RollbackToWaitSavepoint ends a slice that failed under [WaitSavepoint],
// which then stays.
const RollbackToWaitSavepoint = "ROLLBACK TO SAVEPOINT " + WaitSavepoint

// LeaveWaitSavepoint ends a wait that ran out under [WaitSavepoint], and
// the savepoint with it: the transaction is then as it was before the
// wait.
const LeaveWaitSavepoint = RollbackToWaitSavepoint + "; RELEASE SAVEPOINT " + WaitSavepoint

// InSavepoint returns slice wrapped for a transaction block that must
// outlive a slice that fails: it runs under a savepoint, released when the
// slice takes its keys. again says a slice failed before, which left the
// transaction aborted under the savepoint, and so rolls back to it first:
//
//	SAVEPOINT pgadvisory_wait; SELECT ...; RELEASE SAVEPOINT pgadvisory_wait
//	ROLLBACK TO SAVEPOINT pgadvisory_wait; SELECT ...; RELEASE SAVEPOINT pgadvisory_wait
//
// The statements go in one message, so the text carries no parameters:
// lib/pq and pgx both send it through the simple query protocol, in one
// round trip, and the server stops at the first that fails.
func InSavepoint(again bool, slice string) string {
	begin := "SAVEPOINT " + WaitSavepoint + "; "
	if again {
		begin = RollbackToWaitSavepoint + "; "
	}
	return begin + slice + "; RELEASE SAVEPOINT " + WaitSavepoint
}

// XactSliceStmt is [XactSlice] for one key, in form f, as
// [SessionSliceStmt] is for a session.
func XactSliceStmt(f Form, shared bool, ms int64, key Key) Stmt {
	if f != Params {
		return Plain(XactSlice(shared, ms, key))
	}
	return sliceParams(xactSliceTexts[b2i(shared)], ms, key)
}

// sliceParams returns the slice statement of texts, for a bigint key and
// for a pair, that fits key, with the bound and the key as its arguments.
func sliceParams(texts [2]string, ms int64, key Key) Stmt {
	bound := strconv.FormatInt(ms, 10)
	if key.Pair {
		return Stmt{Query: texts[1], Args: []any{bound, key.A, key.B}}
	}
	return Stmt{Query: texts[0], Args: []any{bound, key.Bigint}}
}

// sessionSliceTexts and xactSliceTexts hold the slice statements of the
// Params form, by whether the lock is shared, then whether the key is a
// pair; the session's are the Guarded ones, and a lease's own, whose text
// carries its mark, is made per call ([keySliceTexts]).
var (
	sessionSliceTexts [2][2]string
	xactSliceTexts    [2][2]string
	directSliceTexts  [2][2]string
)

// sliceParamPrefix begins every slice statement of the Params form.
const sliceParamPrefix = "SELECT pg_catalog.set_config('lock_timeout', t.prev, true) FROM (SELECT " +
	"pg_catalog.current_setting('lock_timeout') AS prev, pg_catalog.set_config('lock_timeout', $1, true), "

// sliceParamArgs are the arguments of a slice's lock call in the Params
// form, for a bigint key and for a pair.
var sliceParamArgs = [2]string{"($2)", "($2,$3)"}

func init() {
	for shared := range 2 {
		sessionSliceTexts[shared] = keySliceTexts(Guarded, shared == 1)
		for pair, args := range sliceParamArgs {
			xactSliceTexts[shared][pair] = sliceParamPrefix + fn("pg_advisory", true, shared == 1) + args + " OFFSET 0) AS t"
			directSliceTexts[shared][pair] = directSlice(Guarded, shared == 1, "$1", args)
		}
	}
}
