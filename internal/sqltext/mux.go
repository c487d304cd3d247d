package sqltext

import "strconv"

// The statements of a multiplexed locker, whose connections (carriers)
// each hold many leases. A carrier is known by its backend's pid and the
// mark it leaves on its session, as a lease is (see [Holds]): every
// statement that takes or proves a lock first checks both, so that a
// statement a transaction pooler routes to another backend takes nothing
// and reports the carrier lost.

// CarrierStart returns the statement that starts a carrier. It returns
// one row: the backend's pid, whether the server is a hot standby, and the
// carrier's mark, a number the server draws and sets on the session, or
// NULL when the session already bears a mark, which is then another
// lease's (behind a transaction pooler, another client's): the carrier is
// refused, and the mark is left as it is.
//
//	SELECT pg_catalog.pg_backend_pid(), pg_catalog.pg_is_in_recovery(),
//	CASE WHEN COALESCE(pg_catalog.current_setting(...), '') = '' THEN
//	pg_catalog.set_config('pgadvisory.lease',
//	pg_catalog.floor(pg_catalog.random() *
//	9007199254740992)::pg_catalog.int8::pg_catalog.text,
//	false)::pg_catalog.int8 END
const CarrierStart = "SELECT pg_catalog.pg_backend_pid(), pg_catalog.pg_is_in_recovery(), " + setMarkIfNone

// markSetting names the session setting that holds a lease's mark.
const markSetting = "pgadvisory.lease"

// setMark is the select-list entry that draws a mark, sets it on the
// session and returns it, as a number: no string of the client's goes
// into SQL text.
const setMark = "pg_catalog.set_config('" + markSetting +
	"', pg_catalog.floor(pg_catalog.random() * 9007199254740992)::pg_catalog.int8::pg_catalog.text, false)::pg_catalog.int8"

// unmarked is true when the session bears no lease's mark: it never had
// one (NULL), or the lease that left it has ended (”).
const unmarked = "COALESCE(pg_catalog.current_setting('" + markSetting + "', true), '') = ''"

// setMarkIfNone is [setMark] on a session that bears no mark, and NULL on
// one that does.
const setMarkIfNone = "CASE WHEN " + unmarked + " THEN " + setMark + " END"

// ours renders the condition that the statement runs on the carrier's own
// backend, which still bears its mark.
func ours(pid, mark int64) string {
	return "pg_catalog.pg_backend_pid() = " + strconv.FormatInt(pid, 10) +
		" AND pg_catalog.current_setting('" + markSetting + "', true) = '" + strconv.FormatInt(mark, 10) + "'"
}

// CarrierTry returns the statement that tries key on the carrier named by
// pid and mark, without waiting. Its answer is its number of rows: none
// when the session is not the carrier's, one when the key is busy, two
// when the lock was taken:
//
//	SELECT 1 FROM pg_catalog.generate_series(1, CASE WHEN
//	pg_catalog.pg_backend_pid() = 4242 AND
//	pg_catalog.current_setting('pgadvisory.lease', true) = '8177' THEN CASE
//	WHEN pg_catalog.pg_try_advisory_lock(42) THEN 2 ELSE 1 END ELSE 0 END)
//
// CASE fixes the order: the key is tried only on the carrier's session.
func CarrierTry(pid, mark int64, shared bool, key Key) string {
	return "SELECT 1 FROM pg_catalog.generate_series(1, CASE WHEN " + ours(pid, mark) + " THEN CASE WHEN " +
		call(fn("pg_try_advisory", false, shared), key) + " THEN 2 ELSE 1 END ELSE 0 END)"
}

// CarrierTryFenced is [CarrierTry] with a fencing token. It returns one
// row: NULL when the session is not the carrier's, 0 when the key is busy,
// and the token when the lock was taken:
//
//	SELECT CASE WHEN pg_catalog.pg_backend_pid() = 4242 AND ... THEN CASE
//	WHEN pg_catalog.pg_try_advisory_lock(42) THEN t.t ELSE 0 END END FROM
//	(SELECT (SELECT ... timeline << 40 | pg_catalog.nextval(...) ...)
//	AS t OFFSET 0) AS t
//
// The token is drawn first ([nextToken]), in a subquery that OFFSET 0 keeps apart, so
// that a failure to draw it (the sequence does not exist yet: SQLSTATE
// 42P01, see [CreateFencingSequence]) takes no lock. A busy key spends a token; tokens only need to increase.
//
// The statement returns rows, which pgx prepares whatever the form, so in
// the Params form the key is $1 (or $1,$2): the text is then the same for
// every key on the carrier, and pgx prepares it once.
func CarrierTryFenced(f Form, pid, mark int64, shared bool, key Key) Stmt {
	try, args := callIn(f, fn("pg_try_advisory", false, shared), key)
	return Stmt{
		Query: "SELECT CASE WHEN " + ours(pid, mark) + " THEN CASE WHEN " + try +
			" THEN t.t ELSE 0 END END FROM (SELECT " + nextToken + " AS t OFFSET 0) AS t",
		Args: args,
	}
}

// CarrierUnlock returns the statement that releases one hold of key on
// the carrier. It affects one row when the carrier's session held it,
// [HoldsElsewhere] rows when it ran on another backend, as a transaction
// pooler routes it, and none otherwise:
//
//	SELECT 1 FROM pg_catalog.generate_series(1, CASE WHEN
//	pg_catalog.pg_backend_pid() = 4242 AND ... THEN CASE WHEN
//	pg_catalog.pg_advisory_unlock(42) THEN 1 ELSE 0 END WHEN
//	pg_catalog.pg_backend_pid() <> 4242 THEN 2 ELSE 0 END)
//
// CASE fixes the order, so a statement routed to another backend releases
// nothing there.
func CarrierUnlock(pid, mark int64, shared bool, key Key) string {
	return "SELECT 1 FROM pg_catalog.generate_series(1, CASE WHEN " + ours(pid, mark) + " THEN CASE WHEN " +
		call(unlockFn(shared), key) + " THEN 1 ELSE 0 END WHEN pg_catalog.pg_backend_pid() <> " +
		strconv.FormatInt(pid, 10) + " THEN 2 ELSE 0 END)"
}

// carrierHeld renders the pg_locks condition of the advisory locks the
// carrier's session holds.
func carrierHeld(pid, mark int64) string {
	return "locktype = 'advisory' AND granted AND pid = " + strconv.FormatInt(pid, 10) + " AND " + ours(pid, mark)
}

// CarrierCount returns the heartbeat of a carrier: one row, the number of
// distinct locks (key and mode) the carrier's session holds, -1 when the
// statement ran on another backend (a transaction pooler routed it
// there), and 0 when on the carrier's backend, which no longer bears its
// mark. Its text is the same at every beat, so a driver that prepares
// statements prepares it once.
func CarrierCount(pid, mark int64) string {
	return "SELECT CASE WHEN pg_catalog.pg_backend_pid() <> " + strconv.FormatInt(pid, 10) +
		" THEN -1 ELSE (SELECT pg_catalog.count(*) FROM pg_catalog.pg_locks WHERE " + carrierHeld(pid, mark) + ") END"
}

// CarrierAlive returns the heartbeat of a carrier between two counts
// ([CarrierCount]): one row, 1 when the statement ran on the carrier's own
// session, which still bears its mark, 0 when on its backend without the
// mark, and -1 on another backend (a transaction pooler routed it there).
// It reads one setting and reads no lock table: a live session loses its
// session locks only by an unlock statement sent on it, which no code but
// the carrier's sends unless a pooler shares its backend, so the count
// that proves each lock runs only every few beats. Its text is the same at
// every beat.
//
//	SELECT CASE WHEN pg_catalog.pg_backend_pid() <> 4242 THEN -1 WHEN
//	pg_catalog.current_setting('pgadvisory.lease', true) = '8177' THEN 1
//	ELSE 0 END
func CarrierAlive(pid, mark int64) string {
	return "SELECT CASE WHEN pg_catalog.pg_backend_pid() <> " + strconv.FormatInt(pid, 10) +
		" THEN -1 WHEN pg_catalog.current_setting('" + markSetting + "', true) = '" + strconv.FormatInt(mark, 10) + "' THEN 1 ELSE 0 END"
}

// CarrierRelease returns the statement that ends a carrier: on the
// carrier's own session it releases every session lock and removes the
// mark, so that the session can serve others; sent through a transaction
// pooler that routes it to another backend, it ends the carrier's backend
// instead (pg_terminate_backend; see reclaim), since no statement of the
// carrier's may ever reach it again, and its locks and mark would stay
// there. The rows it affects tell which: 1 released, 2 the backend ended,
// none for neither (the carrier's backend is gone, or it is its own
// without its mark):
//
//	SELECT 1 FROM pg_catalog.generate_series(1, CASE WHEN
//	pg_catalog.pg_backend_pid() = 4242 AND ... THEN CASE WHEN
//	pg_catalog.pg_advisory_unlock_all() IS NULL OR
//	pg_catalog.set_config('pgadvisory.lease', '', false) IS NULL THEN 1
//	ELSE 1 END WHEN pg_catalog.pg_backend_pid() <> 4242 AND EXISTS
//	(SELECT 1 FROM pg_catalog.pg_stat_activity AS a, ... WHERE a.pid =
//	4242 ...) THEN CASE WHEN pg_catalog.pg_terminate_backend(4242) THEN 2
//	ELSE 0 END ELSE 0 END)
func CarrierRelease(pid, mark int64) string {
	return "SELECT 1 FROM pg_catalog.generate_series(1, CASE WHEN " + ours(pid, mark) + " THEN " + releaseAll + reclaim(pid) + " ELSE 0 END)"
}

// CarrierReleaseFrom is [CarrierRelease] for a carrier whose own
// connection is closed, sent on another connection: it ends the carrier's
// backend from another one only while that backend still holds an
// advisory lock, so that a backend that took the carrier's pid, once the
// carrier's session ended, is never ended.
func CarrierReleaseFrom(pid, mark int64) string {
	return "SELECT 1 FROM pg_catalog.generate_series(1, CASE WHEN " + ours(pid, mark) + " THEN " + releaseAll + reclaimHolding(pid, "") + " ELSE 0 END)"
}

// reclaimHolding is [reclaim], limited to a backend that holds an advisory
// lock: any, or, when held is not "", the one held describes (see
// heldBy).
func reclaimHolding(pid int64, held string) string {
	if held == "" {
		held = "locktype = 'advisory' AND granted AND pid = " + strconv.FormatInt(pid, 10)
	}
	return reclaimIf(pid, " AND EXISTS (SELECT 1 FROM pg_catalog.pg_locks WHERE "+held+")")
}

// releaseAll is the CASE branch that releases every session lock and
// removes the mark, answering 1. Both calls are in one condition that is
// false either way, OR, so that both run.
const releaseAll = "CASE WHEN pg_catalog.pg_advisory_unlock_all() IS NULL OR " + clearMark + " IS NULL THEN 1 ELSE 1 END"

// clearMark removes a lease's mark from the session.
const clearMark = "pg_catalog.set_config('" + markSetting + "', '', false)"

// reclaim renders the CASE branch that, on another backend than pid,
// ends pid when it is a session of the same database, role and client
// address, answering 2: behind a transaction pooler, one of the pooler's
// sessions, which bears the lease's mark and may hold its locks. The
// check keeps a pid that the server has since given to an unrelated
// session from being ended.
func reclaim(pid int64) string { return reclaimIf(pid, "") }

// reclaimIf is [reclaim] with more conditions, also, on the backend to end.
func reclaimIf(pid int64, also string) string {
	p := strconv.FormatInt(pid, 10)
	return " WHEN pg_catalog.pg_backend_pid() <> " + p +
		" AND EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity AS a, pg_catalog.pg_stat_activity AS me WHERE a.pid = " + p +
		" AND me.pid = pg_catalog.pg_backend_pid() AND a.datid = me.datid AND a.usesysid = me.usesysid" +
		" AND a.client_addr IS NOT DISTINCT FROM me.client_addr)" + also +
		" THEN CASE WHEN pg_catalog.pg_terminate_backend(" + p + ") THEN 2 ELSE 0 END"
}

// CarrierHeld returns the statement that lists the locks the carrier's
// session holds, one row each: the key's pg_locks columns (classid, objid,
// objsubid) and whether the lock is shared. A carrier sends it only when
// [CarrierCount] finds fewer locks than it expects.
func CarrierHeld(pid, mark int64) string {
	return "SELECT classid::pg_catalog.int8, objid::pg_catalog.int8, objsubid::pg_catalog.int4, mode = 'ShareLock' " +
		"FROM pg_catalog.pg_locks WHERE " + carrierHeld(pid, mark)
}

// KeyFromTag returns the key that pg_locks shows as classid, objid and
// objsubid, the inverse of how an advisory lock is shown there.
func KeyFromTag(classid, objid int64, objsubid int) Key {
	if objsubid == 2 {
		return Key{Pair: true, A: int32(uint32(classid)), B: int32(uint32(objid))}
	}
	return Key{Bigint: int64(uint64(uint32(classid))<<32 | uint64(uint32(objid)))}
}

// CarrierUnlockBatch returns the statement that releases one hold of each
// of keys on the carrier, in one round trip, as [CarrierUnlock] does for
// one: shared[i] is the mode of keys[i]. It returns one row per key, in no
// set order: the key's place in keys, from 1, and 1 when the carrier's
// session held it, [HoldsElsewhere] when the statement ran on another
// backend, as a transaction pooler routes it, and 0 otherwise:
//
//	SELECT u.i, CASE WHEN pg_catalog.pg_backend_pid() = 4242 AND ... THEN
//	CASE WHEN CASE WHEN x.p[u.i] THEN CASE WHEN x.s[u.i] THEN
//	pg_catalog.pg_advisory_unlock_shared(x.a[u.i], x.b[u.i]) ELSE ... END
//	... END THEN 1 ELSE 0 END WHEN pg_catalog.pg_backend_pid() <> 4242 THEN
//	2 ELSE 0 END FROM (SELECT '{0,-1}'::pg_catalog.int4[] AS a, ... AS s)
//	AS x, pg_catalog.unnest('{42,0}'::pg_catalog.int8[]) WITH ORDINALITY
//	AS u(k, i)
//
// The keys go as five arrays: the bigint keys, the pairs' two halves,
// which keys are pairs, and which are shared; the statement unnests the
// first and reads the others at its place. In the Params form the arrays
// are $1 to $5, as text, so that the text is the same for every
// batch on the carrier and pgx prepares it once. CASE fixes the order, so
// a statement routed to another backend releases nothing there.
func CarrierUnlockBatch(f Form, pid, mark int64, keys []Key, shared []bool) Stmt {
	var ks, as, bs, ps, ss []byte
	for i, k := range keys {
		if i > 0 {
			ks, as, bs, ps, ss = append(ks, ','), append(as, ','), append(bs, ','), append(ps, ','), append(ss, ',')
		}
		ks = strconv.AppendInt(ks, k.Bigint, 10)
		as = strconv.AppendInt(as, int64(k.A), 10)
		bs = strconv.AppendInt(bs, int64(k.B), 10)
		ps = strconv.AppendBool(ps, k.Pair)
		ss = strconv.AppendBool(ss, i < len(shared) && shared[i])
	}
	arrays := []string{"{" + string(ks) + "}", "{" + string(as) + "}", "{" + string(bs) + "}", "{" + string(ps) + "}", "{" + string(ss) + "}"}
	types := []string{"int8", "int4", "int4", "bool", "bool"}
	var args []any
	in := make([]string, len(arrays))
	for i, a := range arrays {
		if f == Params {
			in[i] = "$" + strconv.Itoa(i+1) + "::pg_catalog.text::pg_catalog." + types[i] + "[]"
			args = append(args, a)
		} else {
			in[i] = "'" + a + "'::pg_catalog." + types[i] + "[]"
		}
	}
	unlock := func(args string) string {
		return "CASE WHEN x.s[u.i] THEN " + unlockFn(true) + "(" + args + ") ELSE " + unlockFn(false) + "(" + args + ") END"
	}
	return Stmt{
		Query: "SELECT u.i, CASE WHEN " + ours(pid, mark) + " THEN CASE WHEN CASE WHEN x.p[u.i] THEN " + unlock("x.a[u.i], x.b[u.i]") +
			" ELSE " + unlock("u.k") + " END THEN 1 ELSE 0 END WHEN pg_catalog.pg_backend_pid() <> " + strconv.FormatInt(pid, 10) +
			" THEN 2 ELSE 0 END FROM (SELECT " + in[1] + " AS a, " + in[2] + " AS b, " + in[3] + " AS p, " + in[4] +
			" AS s) AS x, pg_catalog.unnest(" + in[0] + ") WITH ORDINALITY AS u(k, i)",
		Args: args,
	}
}
