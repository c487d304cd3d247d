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
// statement_timeout and deadlock_timeout, as current_setting shows them.
const WaitSettings = "SELECT pg_catalog.current_setting('lock_timeout'), " +
	"pg_catalog.current_setting('statement_timeout'), pg_catalog.current_setting('deadlock_timeout')"

// SessionSlice returns one slice of a wait for session locks on keys, in
// the order given: it waits at most ms milliseconds, then fails with
// SQLSTATE 55P03 holding nothing it took:
//
//	SELECT pg_catalog.set_config('lock_timeout', t.prev, true) FROM (SELECT
//	pg_catalog.current_setting('lock_timeout') AS prev,
//	pg_catalog.set_config('lock_timeout', '1000', true),
//	(SELECT pg_catalog.count(*) FROM (SELECT pg_catalog.pg_advisory_xact_lock(k)
//	FROM (VALUES (42)) AS k(k)) AS l),
//	(SELECT pg_catalog.count(*) FROM (SELECT pg_catalog.pg_advisory_lock(k)
//	FROM (VALUES (42)) AS k(k)) AS l) WHERE NOT (pg_catalog.pg_is_in_recovery()
//	OR COALESCE(pg_catalog.current_setting('pgadvisory.lease', true), '') <> '') OFFSET 0) AS t
//
// The select list runs left to right (see boundedBy). The keys
// are rows of a VALUES list, even one key, because a scan looks for
// interrupts before each row: the server can grant a transaction lock as
// lock_timeout fires and raise the timeout only at its next look, and that
// look must come before the session locks, not after them, or the failed
// statement would leave them held.
//
// The slice is guarded by g: it returns no row and takes nothing where
// [TryLock] would refuse, and [Refusal] then tells why. Session locks are
// the ones a transaction pooler shares, and each slice runs as a
// transaction of its own, which the pooler may send to any backend.
func SessionSlice(g Guard, shared bool, ms int64, keys ...Key) string {
	return boundedBy(quoted(ms), sessionWaits(g, shared, keys))
}

// FirstSessionSlice is the first slice of a wait for session locks on
// keys, which a wait sends before it knows the session's settings, and
// which takes free keys in one statement: it waits at most ms
// milliseconds, or less when the session's lock_timeout, or nine tenths
// of its statement_timeout, is shorter (see [firstBound]).
func FirstSessionSlice(g Guard, shared bool, ms int64, keys ...Key) string {
	return boundedBy(firstBound(strconv.FormatInt(ms, 10)), sessionWaits(g, shared, keys))
}

// sessionWaits renders the select-list entries of a session slice and its
// guard.
func sessionWaits(g Guard, shared bool, keys []Key) string {
	return scanned(true, shared, keys) + ", " + scanned(false, shared, keys) + " WHERE NOT (" + refused(g) + ")"
}

// firstBound renders the lock_timeout of a first slice, ms (an SQL
// expression) or less when the session's own bounds are shorter, as
// text:
//
//	GREATEST(LEAST(1100, NULLIF((pg_catalog.date_part('epoch',
//	pg_catalog.current_setting('lock_timeout')::pg_catalog.interval) *
//	1000)::pg_catalog.int8, 0), NULLIF(... 'statement_timeout' ... * 900
//	...)), 1)::pg_catalog.text
//
// LEAST skips the NULL of a setting that is 0, which is none. The
// statement_timeout counts from the statement's start, so nine tenths of
// it leaves the rest of the statement room to end; a wait that runs out
// then reads the settings (see internal/scope's wait.go), and ends.
func firstBound(ms string) string {
	setting := func(name, scale string) string {
		return "NULLIF((pg_catalog.date_part('epoch', pg_catalog.current_setting('" + name +
			"')::pg_catalog.interval) * " + scale + ")::pg_catalog.int8, 0)"
	}
	return "GREATEST(LEAST(" + ms + ", " + setting("lock_timeout", "1000") + ", " +
		setting("statement_timeout", "900") + "), 1)::pg_catalog.text"
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
// refuse, it fails with SQLSTATE [RefusedSlice] before it takes anything,
// since in a transaction block its rows cannot be seen (see [InSavepoint]),
// and [EndRefusedSlice] then tells why. The bound it sets is the refusal:
//
//	pg_catalog.set_config('lock_timeout', CASE WHEN
//	pg_catalog.pg_is_in_recovery() OR ... THEN '-1' ELSE '1100' END, true)
//
// where PostgreSQL refuses the value -1 for lock_timeout.
func GuardedXactSlice(g Guard, shared bool, ms int64, keys ...Key) string {
	return boundedBy("CASE WHEN "+refused(g)+" THEN '-1' ELSE "+quoted(ms)+" END", locks(true, shared, keys))
}

// RefusedSlice is the SQLSTATE of a [GuardedXactSlice] that refused:
// invalid_parameter_value, which its own bound raises and nothing else in
// it can.
const RefusedSlice = "22023"

// EndRefusedSlice returns the statements that end a [GuardedXactSlice]
// that refused, in one message, and tell why, as rows: [TryStandby] or
// [TryShared]. In a transaction the caller began (savepoint), they roll
// back to the wait's savepoint and release it, which leaves the
// transaction as it was; in a transaction of the wait's own, they begin
// the next with begin, as [InNewTransaction] does.
func EndRefusedSlice(savepoint bool, begin string) string {
	why := "SELECT 1 FROM pg_catalog.generate_series(1, CASE WHEN " + inRecovery + " THEN 2 ELSE 3 END)"
	if savepoint {
		return LeaveWaitSavepoint + "; " + why
	}
	return "ROLLBACK; " + begin + "; " + why
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

// SessionSliceStmt is [SessionSlice] for one key, in form f. In the Params
// form the bound is $1 and the key $2 (or $2 and $3), so that the text is
// the same for every slice and key, and pgx prepares it once per
// connection.
func SessionSliceStmt(f Form, g Guard, shared bool, ms int64, key Key) Stmt {
	if f != Params {
		return Plain(SessionSlice(g, shared, ms, key))
	}
	return sliceParams(sessionSliceTexts[g][b2i(shared)], ms, key)
}

// FirstSessionSliceStmt is [FirstSessionSlice] for one key, in form f,
// as [SessionSliceStmt] is for a later slice: in the Params form the
// bound is $1, a number.
func FirstSessionSliceStmt(f Form, g Guard, shared bool, ms int64, key Key) Stmt {
	if f != Params {
		return Plain(FirstSessionSlice(g, shared, ms, key))
	}
	s := sliceParams(firstSessionSliceTexts[g][b2i(shared)], ms, key)
	s.Args[0] = ms
	return s
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
// pair; the session's first by guard.
var (
	sessionSliceTexts      [2][2][2]string
	firstSessionSliceTexts [2][2][2]string
	xactSliceTexts         [2][2]string
)

func init() {
	prefixes := func(bound string) string {
		return "SELECT pg_catalog.set_config('lock_timeout', t.prev, true) FROM (SELECT " +
			"pg_catalog.current_setting('lock_timeout') AS prev, pg_catalog.set_config('lock_timeout', " + bound + ", true), "
	}
	prefix, first := prefixes("$1"), prefixes(firstBound("$1::pg_catalog.int8"))
	// The session texts scan their key, as [SessionSlice] does.
	scan := [2]string{
		"(k) FROM (VALUES ($2::pg_catalog.int8)) AS k(k)) AS l)",
		"(a,b) FROM (VALUES ($2::pg_catalog.int4,$3::pg_catalog.int4)) AS p(a,b)) AS l)",
	}
	for shared := range 2 {
		for pair, args := range [2]string{"($2)", "($2,$3)"} {
			xact := fn("pg_advisory", true, shared == 1)
			session := fn("pg_advisory", false, shared == 1)
			xactSliceTexts[shared][pair] = prefix + xact + args + " OFFSET 0) AS t"
			for g := range sessionSliceTexts {
				waits := "(SELECT pg_catalog.count(*) FROM (SELECT " + xact + scan[pair] + ", " +
					"(SELECT pg_catalog.count(*) FROM (SELECT " + session + scan[pair] +
					" WHERE NOT (" + refused(Guard(g)) + ") OFFSET 0) AS t"
				sessionSliceTexts[g][shared][pair] = prefix + waits
				firstSessionSliceTexts[g][shared][pair] = first + waits
			}
		}
	}
}
