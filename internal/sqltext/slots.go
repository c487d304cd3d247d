package sqltext

import (
	"strconv"
	"strings"
)

// The answers of a try for any of several keys ([TryAny], [WaitAny],
// and a semaphore's [SlotTry], [SlotWait]) besides the place of the key
// taken, which counts from 1.
const (
	SlotBusy    = 0  // every key is taken
	SlotStandby = -2 // refused: the server is a hot standby
	SlotShared  = -3 // refused: the session bears a lease's mark
)

// SlotTry returns the statement that tries the slots of a semaphore in
// order and takes the first it can, as a session lock: [TryAny] under
// [Guarded]. A semaphore's sessions are its own, on which no lease of the
// caller's runs, so they must bear no mark at all.
func SlotTry(f Form, order []Key) Stmt { return TryAny(f, Guarded, order) }

// TryAny returns the statement that tries the keys of order in order and
// takes the first it can, as a session lock. Its one row is the
// place in order, from 1, of the key it took, [SlotBusy] when every key
// is taken, or, where g refuses, [SlotStandby] or [SlotShared],
// having tried nothing:
//
//	SELECT CASE WHEN pg_catalog.pg_is_in_recovery() THEN -2 WHEN <marked>
//	THEN -3 ELSE COALESCE((SELECT s.o FROM
//	pg_catalog.unnest(ARRAY[2,3,1]::pg_catalog.int8[]) WITH ORDINALITY AS
//	s(k, o) WHERE pg_catalog.pg_try_advisory_lock(s.k) LIMIT 1), 0) END
//
// The branches of CASE and COALESCE run in order and only as far as
// needed, and a scalar subquery runs when it is first needed, so a refusal
// tries nothing. There is no ORDER BY, so that the filter runs row by row
// and LIMIT stops it at the first lock taken. The keys are of one key
// space, and pairs share their first integer. In the Params form the keys
// go as one array parameter, $1, and a pair's first integer as $2, so that
// the text is the same for every order: pgx prepares it once per
// connection, not once per order. order must not be empty.
func TryAny(f Form, g Guard, order []Key) Stmt {
	slots, ns, args := slotArgs(f, order)
	return Stmt{Query: "SELECT " + anyRefusals(g) + " ELSE COALESCE(" + slotTry(slots, ns) + ", 0) END", Args: args}
}

// SlotWait returns the statement of a semaphore's wait: [WaitAny] under
// [Guarded], as [SlotTry] is.
func SlotWait(f Form, order []Key, ms int64) Stmt { return WaitAny(f, Guarded, order, ms) }

// WaitAny returns the statement of a wait for any of the keys of order:
// it releases every session lock the session holds, tries the keys as
// [TryAny] does under g, and when every key is taken waits for the first
// key of order, for at most
// ms milliseconds (less when statement_timeout would cancel it first: at
// most nine tenths of it), and takes that. Its one row is the restored
// lock_timeout and the answer of [TryAny]; a wait that runs out fails
// with SQLSTATE 55P03, holding nothing:
//
//	SELECT pg_catalog.set_config('lock_timeout', t.prev, true), t.o FROM
//	(SELECT pg_catalog.current_setting('lock_timeout') AS prev, CASE WHEN
//	<standby> THEN -2 WHEN <marked> THEN -3 ELSE COALESCE((SELECT
//	NULL::pg_catalog.int8 WHERE pg_catalog.pg_advisory_unlock_all() IS
//	NULL), <TryAny's try>, (SELECT 1 FROM (SELECT
//	pg_catalog.set_config('lock_timeout', <ms, or less>, true) AS b,
//	(SELECT pg_catalog.count(*) FROM (SELECT
//	pg_catalog.pg_advisory_xact_lock(v.k) FROM (VALUES (2)) AS v(k)) AS l)
//	AS x, (SELECT pg_catalog.count(*) FROM (SELECT
//	pg_catalog.pg_advisory_lock(v.k) FROM (VALUES (2)) AS v(k)) AS l) AS s
//	OFFSET 0) AS w WHERE w.x = w.s)) END AS o OFFSET 0) AS t
//
// The try and the wait are one statement, so that no slot frees unseen
// between them: a slot that frees before the try is taken by it, and one
// that frees after finds the statement in the server, where a ring
// ([SlotRing]) sees it once it waits. The wait is a slice of
// [SessionSlice]'s kind: the slot is taken as a transaction lock first,
// then as a session lock, each from a VALUES row, so that a lock_timeout
// that fires as the server grants the first lock fails the statement
// before it takes the second, holding nothing. A cancel (SQLSTATE 57014),
// as a ring sends, can land after the session lock, and the session may
// then hold the slot; the next WaitAny releases it before it tries, so
// that no try stacks on it. The session is the waiter's own, a pooled one
// that holds nothing else. The statement ends its own transaction, so
// lock_timeout is the session's again after it, whether it failed or not.
// In the Params form the slots go as $1, a pair's first integer as $2,
// and ms last, so that the text depends on the key space alone.
func WaitAny(f Form, g Guard, order []Key, ms int64) Stmt {
	slots, ns, args := slotArgs(f, order)
	bound := strconv.FormatInt(ms, 10)
	if f == Params {
		bound, args = "$"+strconv.Itoa(len(args)+1)+"::pg_catalog.int8", append(args, ms)
	}
	// statement_timeout, in milliseconds, from current_setting's text.
	const st = "(EXTRACT(EPOCH FROM pg_catalog.current_setting('statement_timeout')::pg_catalog.interval) * 1000)::pg_catalog.int8"
	timeout := "(SELECT CASE WHEN q.st > 0 THEN GREATEST(LEAST(" + bound + ", q.st - q.st / 10), 1) ELSE " + bound +
		" END FROM (SELECT " + st + " AS st) AS q)::pg_catalog.text"
	first := "(" + slots + ")[1]"
	take := func(xact bool) string {
		return "(SELECT pg_catalog.count(*) FROM (SELECT " + fn("pg_advisory", xact, false) + "(" + ns + "v.k) FROM (VALUES (" + first + ")) AS v(k)) AS l)"
	}
	wait := "(SELECT 1 FROM (SELECT pg_catalog.set_config('lock_timeout', " + timeout + ", true) AS b, " +
		take(true) + " AS x, " + take(false) + " AS s OFFSET 0) AS w WHERE w.x = w.s)"
	return Stmt{
		Query: "SELECT pg_catalog.set_config('lock_timeout', t.prev, true), t.o FROM (SELECT " +
			"pg_catalog.current_setting('lock_timeout') AS prev, " + anyRefusals(g) +
			" ELSE COALESCE(" + unlockAll + ", " + slotTry(slots, ns) + ", " + wait + ") END AS o OFFSET 0) AS t",
		Args: args,
	}
}

// slotRefusals opens the CASE of a semaphore's try: its first branches
// refuse as [Guarded] says.
const slotRefusals = "CASE WHEN " + inRecovery + " THEN -2 WHEN " + marked + " THEN -3"

// anyRefusals opens the CASE of [TryAny] and [WaitAny]: its first branches
// refuse as g says, answering [SlotStandby] or [SlotShared] instead of
// raising an error. A lease's own call refuses a session that bears
// another mark than the lease's.
func anyRefusals(g Guard) string {
	if g == Guarded {
		return slotRefusals
	}
	return "CASE WHEN " + inRecovery + " THEN -2 WHEN " + marked + " AND pg_catalog.current_setting('" + markSetting +
		"', true) <> '" + strconv.FormatInt(g.mark, 10) + "' THEN -3"
}

// unlockAll is a branch of COALESCE that releases every session lock the
// session holds, and is NULL.
const unlockAll = "(SELECT NULL::pg_catalog.int8 WHERE pg_catalog.pg_advisory_unlock_all() IS NULL)"

// slotTry renders the scalar subquery that tries the slots, whose array
// and a pair's first integer (followed by ", ") are given, and is the
// place of the slot it took, or NULL.
func slotTry(slots, ns string) string {
	return "(SELECT s.o FROM pg_catalog.unnest(" + slots + ") WITH ORDINALITY AS s(k, o) WHERE " +
		fn("pg_try_advisory", false, false) + "(" + ns + "s.k) LIMIT 1)"
}

// slotArgs renders the slots of order, as an array, and a pair's first
// integer, followed by ", ", in form f, with the arguments they take.
func slotArgs(f Form, order []Key) (slots, ns string, args []any) {
	pair := order[0].Pair
	typ := "pg_catalog.int8[]"
	if pair {
		typ = "pg_catalog.int4[]"
	}
	if f == Params {
		slots, args = "$1::"+typ, []any{slotArray(order)}
		if pair {
			ns, args = "$2::pg_catalog.int4, ", append(args, order[0].A)
		}
		return slots, ns, args
	}
	slots = "ARRAY[" + slotList(order) + "]::" + typ
	if pair {
		ns = strconv.FormatInt(int64(order[0].A), 10) + ", "
	}
	return slots, ns, nil
}

// slotArray returns the slots' numbers as one array argument: []int64 of
// bigint keys, or []int32 of pairs' second integers.
func slotArray(order []Key) any {
	if order[0].Pair {
		a := make([]int32, len(order))
		for i, k := range order {
			a[i] = k.B
		}
		return a
	}
	a := make([]int64, len(order))
	for i, k := range order {
		a[i] = k.Bigint
	}
	return a
}

// slotList renders the slots' numbers as an array's elements: "2,3,1".
func slotList(order []Key) string {
	var b strings.Builder
	for i, k := range order {
		if i > 0 {
			b.WriteByte(',')
		}
		if k.Pair {
			b.WriteString(strconv.FormatInt(int64(k.B), 10))
		} else {
			b.WriteString(strconv.FormatInt(k.Bigint, 10))
		}
	}
	return b.String()
}
