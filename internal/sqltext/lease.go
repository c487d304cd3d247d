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
	c, o, _ := key.tag()
	return heldAs(pid, shared, key, strconv.FormatUint(uint64(c), 10), strconv.FormatUint(uint64(o), 10))
}

// heldAs is heldBy with classid and objid given as SQL expressions, such
// as parameters.
func heldAs(pid string, shared bool, key Key, classid, objid string) string {
	_, _, s := key.tag()
	mode := "ExclusiveLock"
	if shared {
		mode = "ShareLock"
	}
	return "locktype = 'advisory' AND pid = " + pid +
		" AND classid = " + classid + "::pg_catalog.int8::pg_catalog.oid" +
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

// Holds returns the statement that proves a lease: it affects one row when
// backend pid is the session's own, holds key in the lease's mode, and
// still bears the lease's mark (see LeaseStart), and none otherwise:
//
//	SELECT 1 FROM pg_catalog.pg_locks WHERE locktype = 'advisory' AND pid =
//	4242 AND pid = pg_catalog.pg_backend_pid() AND classid =
//	0::pg_catalog.int8::pg_catalog.oid AND objid =
//	42::pg_catalog.int8::pg_catalog.oid AND objsubid = 1 AND mode =
//	'ExclusiveLock' AND granted AND
//	pg_catalog.current_setting('pgadvisory.lease', true) = '8177'
//
// The backend check catches a statement that a transaction pooler routed
// to another backend; the mark catches another client of the pooler that
// took the key on this backend, where the locks stack.
func Holds(pid int64, shared bool, key Key, mark int64) string {
	return "SELECT 1 FROM pg_catalog.pg_locks WHERE " +
		heldBy(strconv.FormatInt(pid, 10)+" AND pid = pg_catalog.pg_backend_pid()", shared, key) +
		" AND pg_catalog.current_setting('" + leaseMark(key) + "', true) = '" + strconv.FormatInt(mark, 10) + "'"
}

// LeaseStart returns the statement that a lease sends right after its lock
// statement. It returns one row: the backend's pid, whether the server is
// a hot standby, whether the backend holds key in the lease's mode, and,
// with fencing, the next fencing token (NULL on a standby, where nextval
// cannot run), and the lease's mark, which it sets on the session for
// Holds to check:
//
//	SELECT pg_catalog.pg_backend_pid(), pg_catalog.pg_is_in_recovery(),
//	EXISTS (SELECT 1 FROM pg_catalog.pg_locks WHERE ... pid =
//	pg_catalog.pg_backend_pid() ...), CASE WHEN
//	pg_catalog.pg_is_in_recovery() THEN NULL ELSE (SELECT ... timeline
//	<< 40 | pg_catalog.nextval(...) ...) END,
//	pg_catalog.set_config('pgadvisory.lease',
//	pg_catalog.floor(pg_catalog.random() *
//	9007199254740992)::pg_catalog.int8::pg_catalog.text,
//	false)::pg_catalog.int8
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
	var held string
	var args []any
	if f == Params {
		c, o, _ := key.tag()
		held = heldAs("pg_catalog.pg_backend_pid()", shared, key, "$1", "$2")
		args = []any{int64(c), int64(o)}
	} else {
		held = heldBy("pg_catalog.pg_backend_pid()", shared, key)
	}
	return Stmt{
		Query: "SELECT pg_catalog.pg_backend_pid(), pg_catalog.pg_is_in_recovery(), EXISTS (SELECT 1 FROM pg_catalog.pg_locks WHERE " +
			held + "), " + token + ", " + setMark,
		Args: args,
	}
}
