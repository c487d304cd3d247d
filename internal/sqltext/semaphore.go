package sqltext

import "strconv"

// SlotRing returns the statement that wakes waiters of a semaphore whose
// n slots are the n keys from base, as [SlotTry]'s are: for a bigint base
// the keys base..base+n-1, for a pair (a, b) the pairs (a, b+i), the
// second integer wrapping around. It reads pg_locks once, counts the
// slots that are free (n less those granted), and cancels the current
// statement of as many waiters as there are free slots, those whose wait
// began first: backends that wait for a slot of the semaphore in its
// database, as pg_stat_activity shows (wait event Lock/advisory), and
// that the role may signal, so that pg_cancel_backend never fails for want
// of a privilege: a role whose privileges the role has, and a superuser's
// backend only when the role is one. A waiter on a slot that has just
// freed holds it already: the server grants a freed lock to its first
// waiter as it frees it. Its one row is the number of backends signalled:
//
//	SELECT pg_catalog.count(*) FILTER (WHERE w.cancelled) FROM (SELECT
//	pg_catalog.pg_cancel_backend(p.pid) AS cancelled FROM (SELECT
//	pg_catalog.count(DISTINCT k.slot) FILTER (WHERE k.granted) AS held,
//	pg_catalog.array_agg(k.pid ORDER BY k.waitstart) FILTER (WHERE a.pid
//	IS NOT NULL) AS waiting FROM (SELECT l.pid, l.granted, l.waitstart,
//	<slot> AS slot FROM pg_catalog.pg_locks l WHERE l.locktype =
//	'advisory' AND l.database = ... AND <slot in range>) AS k LEFT JOIN
//	pg_catalog.pg_stat_activity a ON a.pid = k.pid AND NOT k.granted AND
//	...) AS s CROSS JOIN LATERAL pg_catalog.unnest(s.waiting[1:n -
//	s.held]) AS p(pid)) AS w
//
// where a bigint slot is (classid::int8 << 32) | objid::int8, in base..
// base+n-1, with objsubid 1, and a pair's is (objid::int8 - b) &
// 4294967295, under n, with classid = a and objsubid 2, a and b read as
// unsigned. A cancelled
// statement fails with SQLSTATE 57014; a backend that the signal finds
// idle ignores it. In the Params form the bounds go as $1, $2 and $3 (the
// first key, or a; the last key, or b; n), so that the text depends on the
// key space alone. base+n-1 must not pass the largest bigint.
func SlotRing(f Form, base Key, n int) Stmt {
	slot, inRange, p3, args := slotRange(f, base, n)
	return Stmt{
		Query: "SELECT pg_catalog.count(*) FILTER (WHERE w.cancelled) FROM (" +
			"SELECT pg_catalog.pg_cancel_backend(p.pid) AS cancelled FROM (" +
			"SELECT pg_catalog.count(DISTINCT k.slot) FILTER (WHERE k.granted) AS held, " +
			"pg_catalog.array_agg(k.pid ORDER BY k.waitstart) FILTER (WHERE a.pid IS NOT NULL) AS waiting " +
			"FROM (SELECT l.pid, l.granted, l.waitstart, " + slot + " AS slot FROM pg_catalog.pg_locks l" +
			" WHERE l.locktype = 'advisory'" +
			" AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())" +
			" AND " + inRange + ") AS k" +
			" LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = k.pid AND NOT k.granted" +
			" AND a.wait_event_type = 'Lock' AND a.wait_event = 'advisory'" +
			" AND pg_catalog.pg_has_role(a.usesysid, 'USAGE')" +
			" AND (pg_catalog.current_setting('is_superuser') = 'on'" +
			" OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.oid = a.usesysid AND r.rolsuper))) AS s " +
			"CROSS JOIN LATERAL pg_catalog.unnest(s.waiting[1:" + p3 + " - s.held]) AS p(pid)) AS w",
		Args: args,
	}
}

// slotRange renders, for the semaphore whose n slots are the n keys from
// base, the expression of a pg_locks row l's slot (from 0 for a pair, the
// key itself for a bigint), the condition that l is on one of the slots,
// and n, in form f, with the arguments they take (see [SlotRing]).
func slotRange(f Form, base Key, n int) (slot, inRange, count string, args []any) {
	var p1, p2, p3 string
	if f == Params {
		p1, p2, p3 = "$1::pg_catalog.int8", "$2::pg_catalog.int8", "$3::pg_catalog.int8"
	}
	if base.Pair {
		a, b := int64(uint32(base.A)), int64(uint32(base.B))
		if f == Params {
			args = []any{a, b, int64(n)}
		} else {
			p1, p2, p3 = strconv.FormatInt(a, 10), strconv.FormatInt(b, 10), strconv.Itoa(n)
		}
		slot = "((l.objid::pg_catalog.int8 - " + p2 + ") & 4294967295)"
		inRange = "l.objsubid = 2 AND l.classid = " + p1 + "::pg_catalog.oid AND " + slot + " < " + p3
	} else {
		first, last := base.Bigint, base.Bigint+int64(n-1)
		if f == Params {
			args = []any{first, last, int64(n)}
		} else {
			p1, p2, p3 = strconv.FormatInt(first, 10), strconv.FormatInt(last, 10), strconv.Itoa(n)
		}
		slot = "((l.classid::pg_catalog.int8 << 32) | l.objid::pg_catalog.int8)"
		inRange = "l.objsubid = 1 AND " + slot + " BETWEEN " + p1 + " AND " + p2
	}
	return slot, inRange, p3, args
}
