package sqltext

import "strconv"

// tag renders the pg_locks columns that name key: classid, objid and
// objsubid, as pg_locks shows a bigint key (objsubid 1) or a pair (2).
func (k Key) tag() (classid, objid uint32, objsubid int) {
	if k.Pair {
		return uint32(k.A), uint32(k.B), 2
	}
	return uint32(uint64(k.Bigint) >> 32), uint32(k.Bigint), 1
}

// heldBy renders the condition, on pg_locks, that the backend named by
// pid (an SQL expression) holds key in mode.
func heldBy(pid string, shared bool, key Key) string {
	classid, objid := key.tagText()
	return heldAs(pid, shared, key, classid, objid)
}

// tagText renders key's classid and objid as SQL literals.
func (k Key) tagText() (classid, objid string) {
	c, o, _ := k.tag()
	return strconv.FormatUint(uint64(c), 10), strconv.FormatUint(uint64(o), 10)
}

// heldAs is heldBy with classid and objid given as SQL expressions, such
// as parameters.
func heldAs(pid string, shared bool, key Key, classid, objid string) string {
	return "locktype = 'advisory' AND pid = " + pid + " AND " + keyHeld(shared, key, classid, objid)
}

// keyHeld renders the condition, on pg_locks, that a backend holds key in
// mode, classid and objid given as SQL expressions.
func keyHeld(shared bool, key Key, classid, objid string) string {
	_, _, s := key.tag()
	mode := "ExclusiveLock"
	if shared {
		mode = "ShareLock"
	}
	return "classid = " + classid + "::pg_catalog.int8::pg_catalog.oid" +
		" AND objid = " + objid + "::pg_catalog.int8::pg_catalog.oid" +
		" AND objsubid = " + strconv.Itoa(s) +
		" AND mode = '" + mode + "' AND granted"
}

// leaseMark names the session setting in which a lease leaves its mark, a
// number of its own. A session setting lives with the backend, so a client
// that shares the backend with another (through a transaction pooler,
// whose clients' locks stack there) overwrites the other's mark when it
// starts a lease. One name serves every key: a session carries one lease,
// and a pooled session that carried many keeps one setting, not one per
// key.
func leaseMark(Key) string { return markSetting }

// Holds returns the statement that proves a lease. Its answer is the
// number of rows it affects: one when backend pid is the session's own,
// holds key in the lease's mode, and still bears the lease's mark (see
// LeaseStart); [HoldsElsewhere] when the statement ran on another backend,
// as a transaction pooler routes it; none otherwise:
//
//	SELECT 1 FROM pg_catalog.generate_series(1, CASE WHEN
//	pg_catalog.pg_backend_pid() <> 4242 THEN 2 WHEN EXISTS (SELECT 1 FROM
//	pg_catalog.pg_locks WHERE locktype = 'advisory' AND pid = 4242 AND
//	classid = 0::pg_catalog.int8::pg_catalog.oid AND objid =
//	42::pg_catalog.int8::pg_catalog.oid AND objsubid = 1 AND mode =
//	'ExclusiveLock' AND granted) AND
//	pg_catalog.current_setting('pgadvisory.lease', true) = '8177' THEN 1
//	ELSE 0 END)
//
// The backend check catches a statement that a transaction pooler routed
// to another backend; the mark catches another client of the pooler that
// took the key on this backend, where the locks stack.
func Holds(pid int64, shared bool, key Key, mark int64) string {
	p := strconv.FormatInt(pid, 10)
	return "SELECT 1 FROM pg_catalog.generate_series(1, CASE WHEN pg_catalog.pg_backend_pid() <> " + p +
		" THEN 2 WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_locks WHERE " + heldBy(p, shared, key) + ")" +
		" AND pg_catalog.current_setting('" + leaseMark(key) + "', true) = '" + strconv.FormatInt(mark, 10) + "'" +
		" THEN 1 ELSE 0 END)"
}

// Alive returns the heartbeat of a lease between two of [Holds]: it
// affects one row when it runs on backend pid, which still bears mark,
// [HoldsElsewhere] rows on another backend, and none on pid without the
// mark. It reads one setting and no lock table: a live session loses its
// session lock only by an unlock statement sent on it, so [Holds], which
// reads pg_locks, runs only every few beats.
//
//	SELECT 1 FROM pg_catalog.generate_series(1, CASE WHEN
//	pg_catalog.pg_backend_pid() <> 4242 THEN 2 WHEN
//	pg_catalog.current_setting('pgadvisory.lease', true) = '8177' THEN 1
//	ELSE 0 END)
func Alive(pid, mark int64) string {
	return "SELECT 1 FROM pg_catalog.generate_series(1, CASE WHEN pg_catalog.pg_backend_pid() <> " + strconv.FormatInt(pid, 10) +
		" THEN 2 WHEN pg_catalog.current_setting('" + markSetting + "', true) = '" + strconv.FormatInt(mark, 10) + "' THEN 1 ELSE 0 END)"
}

// HoldsElsewhere is the answer of [Holds] that ran on another backend.
const HoldsElsewhere = 2

// The answers of [LeaseEnd], as the rows it affects.
const (
	EndNotHeld  = 0 // nothing was released: the lease's lock was gone
	EndReleased = 1 // released on the lease's own session
	EndEnded    = 2 // the lease's backend was ended from another one
	EndTxOpen   = 4 // added when a transaction is open on the session
)

// LeaseEnd returns the statement that releases a lease on backend pid,
// which bears mark: there it releases key (and, when all is set, every
// other session lock) and removes the mark, so that the session can serve
// others. Sent through a transaction pooler that routes it to another
// backend, it ends the lease's backend instead (see reclaim): no
// statement of the lease's may ever reach it again, and its lock and mark
// would stay there. Its answer is the
// rows it affects: [EndReleased], [EndEnded] or [EndNotHeld], plus
// [EndTxOpen] when a transaction block is open on the session (see
// [EndScope]).
func LeaseEnd(pid, mark int64, shared, all bool, key Key) string {
	return leaseEnd(pid, mark, shared, all, key, reclaim(pid))
}

// LeaseEndFrom is [LeaseEnd] for a lease whose own connection is closed,
// sent on another connection: it ends the lease's backend from another
// one only while that backend still holds key in the lease's mode, so
// that a backend that took the pid of the lease's, once the lease's
// session ended, is never ended.
func LeaseEndFrom(pid, mark int64, shared, all bool, key Key) string {
	return leaseEnd(pid, mark, shared, all, key, reclaimHolding(pid, heldBy(strconv.FormatInt(pid, 10), shared, key)))
}

// leaseEnd is [LeaseEnd] with reclaim, the branch that ends the lease's
// backend from another one.
func leaseEnd(pid, mark int64, shared, all bool, key Key, reclaim string) string {
	held := call(unlockFn(shared), key)
	if all {
		held = "CASE WHEN " + held + " THEN pg_catalog.pg_advisory_unlock_all() IS NOT NULL ELSE false END"
	}
	return "SELECT 1 FROM pg_catalog.generate_series(1, CASE WHEN " + ours(pid, mark) +
		" THEN CASE WHEN " + held + " THEN CASE WHEN " + clearMark + " IS NULL THEN 1 ELSE 1 END" +
		" ELSE CASE WHEN " + clearMark + " IS NULL THEN 0 ELSE 0 END END" +
		reclaim + " ELSE 0 END + " +
		"CASE WHEN pg_catalog.statement_timestamp() = pg_catalog.transaction_timestamp() THEN 0 ELSE 4 END)"
}

// LeaseReclaim returns the statement that undoes a lease's lock whose
// backend is not known: the lock statement took key, and the statement
// that confirms it ran on a backend that does not hold it, as behind a
// transaction pooler. On a backend that holds key in the lease's mode and
// bears no mark, it releases key, and affects one row; elsewhere it does
// nothing, and affects none. It never ends another backend: from one
// that does not hold key, the lock statement's backend cannot be told
// from another session's that holds key rightly.
//
//	SELECT 1 WHERE CASE WHEN COALESCE(pg_catalog.current_setting(
//	'pgadvisory.lease', true), '') = '' AND EXISTS (SELECT 1 FROM
//	pg_catalog.pg_locks WHERE ... pid = pg_catalog.pg_backend_pid() ...)
//	THEN pg_catalog.pg_advisory_unlock(42) ELSE false END
func LeaseReclaim(shared bool, key Key) string {
	return "SELECT 1 WHERE CASE WHEN " + unmarkedHolder(shared, key) + " THEN " + call(unlockFn(shared), key) + " ELSE false END"
}

// unmarkedHolder renders the condition that the statement's backend holds
// key in mode and bears no mark: where a lease refused at its start may
// release the lock it took.
func unmarkedHolder(shared bool, key Key) string {
	return unmarked + " AND EXISTS (SELECT 1 FROM pg_catalog.pg_locks WHERE " + heldBy("pg_catalog.pg_backend_pid()", shared, key) + ")"
}

// LeaseStart returns the statement that a lease sends right after its lock
// statement. It returns one row: the backend's pid, whether the server is
// a hot standby, whether the backend holds key in the lease's mode, and,
// with fencing, the next fencing token (NULL on a standby, where nextval
// cannot run), the lease's mark, and, for an exclusive lease, the pid of
// another backend that holds key exclusively. It sets the mark on the
// session for Holds to check only when the backend holds key and bears no
// mark yet: otherwise the mark is NULL, and the session is shared (a
// transaction pooler routed the statement to another backend, or another
// client's lease left its mark there).
//
//	SELECT pg_catalog.pg_backend_pid(), pg_catalog.pg_is_in_recovery(),
//	h.mine, CASE WHEN pg_catalog.pg_is_in_recovery() THEN NULL ELSE
//	(SELECT ... timeline << 40 | pg_catalog.nextval(...) ...) END, CASE
//	WHEN h.mine AND COALESCE(pg_catalog.current_setting('pgadvisory.lease',
//	true), '') = '' THEN pg_catalog.set_config('pgadvisory.lease', ...,
//	false)::pg_catalog.int8 END, h.other FROM (SELECT
//	COALESCE(pg_catalog.bool_or(pid = pg_catalog.pg_backend_pid()), false)
//	AS mine, pg_catalog.min(pid) FILTER (WHERE pid <>
//	pg_catalog.pg_backend_pid()) AS other FROM pg_catalog.pg_locks WHERE
//	locktype = 'advisory' AND classid = ... AND granted) AS h
//
// One scan of pg_locks answers both: whether this backend holds the key,
// and which other one does. An exclusive lock has one holder, so when a
// pooler ran the statement on another backend than the lock statement's,
// the other pid names the backend that took the lock, where
// [LeaseReclaimAt] can undo it. A shared lock may have many holders, and
// its other pid is NULL.
//
// Without fencing the token is NULL::pg_catalog.int8. With it, the
// token is drawn as [nextToken] says, durable and with the server's
// timeline, and a database that lacks the sequence fails the statement
// with SQLSTATE 42P01 (see [CreateFencingSequence]).
//
// The mark is drawn by the server and read back as a number, so that no
// string of the client's goes into SQL text.
//
// In the Params form, classid and objid are $1 and $2, so that the text
// depends on the key's kind alone: the statement returns rows, which pgx
// sends prepared whatever the form, and a text per key would make a
// statement per key.
func LeaseStart(f Form, shared bool, key Key, fencing bool) Stmt {
	token := "NULL::pg_catalog.int8"
	if fencing {
		token = "CASE WHEN pg_catalog.pg_is_in_recovery() THEN NULL ELSE " + nextToken + " END"
	}
	classid, objid := key.tagText()
	var args []any
	if f == Params {
		c, o, _ := key.tag()
		classid, objid = "$1", "$2"
		args = []any{int64(c), int64(o)}
	}
	other := "pg_catalog.min(pid) FILTER (WHERE pid <> pg_catalog.pg_backend_pid())"
	if shared {
		other = "NULL::pg_catalog.int4"
	}
	return Stmt{
		Query: "SELECT pg_catalog.pg_backend_pid(), pg_catalog.pg_is_in_recovery(), h.mine, " + token +
			", CASE WHEN h.mine AND " + unmarked + " THEN " + setMark + " END, h.other FROM (SELECT " +
			"COALESCE(pg_catalog.bool_or(pid = pg_catalog.pg_backend_pid()), false) AS mine, " + other +
			" AS other FROM pg_catalog.pg_locks WHERE locktype = 'advisory' AND " + keyHeld(shared, key, classid, objid) + ") AS h",
		Args: args,
	}
}

// LeaseReclaimAt returns the statement that undoes the lock of an
// exclusive lease refused at its start, which backend pid took (see
// [LeaseStart]). On pid itself, while it holds key and bears no mark, it
// releases key, and affects one row. With end, on another backend, it
// ends pid while pid still holds key exclusively and is a session of the
// same database, role and client address (see [reclaim]), and affects
// two: behind a transaction pooler, the one way to undo a lock on a
// backend that the pooler sends the client's statements elsewhere than.
// Otherwise it does nothing, and affects none: the lock is gone, or, on a
// pid that bears another lease's mark, shares it with that lease.
//
//	SELECT 1 FROM pg_catalog.generate_series(1, CASE WHEN
//	pg_catalog.pg_backend_pid() = 4242 AND COALESCE(...) = '' AND EXISTS
//	(SELECT 1 FROM pg_catalog.pg_locks WHERE ...) THEN CASE WHEN
//	pg_catalog.pg_advisory_unlock(42) THEN 1 ELSE 0 END WHEN
//	pg_catalog.pg_backend_pid() <> 4242 AND ... THEN CASE WHEN
//	pg_catalog.pg_terminate_backend(4242) THEN 2 ELSE 0 END ELSE 0 END)
func LeaseReclaimAt(pid int64, key Key, end bool) string {
	p := strconv.FormatInt(pid, 10)
	q := "SELECT 1 FROM pg_catalog.generate_series(1, CASE WHEN pg_catalog.pg_backend_pid() = " + p + " AND " + unmarkedHolder(false, key) +
		" THEN CASE WHEN " + call(unlockFn(false), key) + " THEN 1 ELSE 0 END"
	if end {
		q += reclaimHolding(pid, heldBy(p, false, key))
	}
	return q + " ELSE 0 END)"
}
