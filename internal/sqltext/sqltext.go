// Package sqltext holds every SQL statement the advisory package sends, in
// one place, so that the mock package can expect exactly the same text.
//
// Keys are rendered into the statement with strconv. A key is only integers,
// so nothing can be injected, and a statement without parameters costs one
// round trip on every driver: lib/pq and pgx both send it through the simple
// query protocol, and pgx prepares nothing. Statements whose answer is a
// boolean are written so that the answer is the number of rows: "SELECT 1
// WHERE pg_try_advisory_lock(42)" reports one row when the lock was taken.
// That lets the caller use ExecContext and read RowsAffected, which keeps
// every driver on its no-parameter, single round-trip path.
package sqltext

import (
	"strconv"
	"strings"
)

// Int64Arg renders the argument list of a bigint key: "42".
func Int64Arg(k int64) string { return strconv.FormatInt(k, 10) }

// PairArg renders the argument list of an (int, int) key: "1,2".
func PairArg(a, b int32) string {
	return strconv.FormatInt(int64(a), 10) + "," + strconv.FormatInt(int64(b), 10)
}

// fn names the server function for a scope and a mode.
func fn(prefix string, xact, shared bool) string {
	var b strings.Builder
	b.WriteString(prefix)
	if xact {
		b.WriteString("_xact")
	}
	b.WriteString("_lock")
	if shared {
		b.WriteString("_shared")
	}
	return b.String()
}

// Lock returns the statement that waits for every key in args, in the
// order given. One key gives "SELECT pg_advisory_lock(42)". Several give
// one row per key, taken as the rows are produced:
//
//	SELECT pg_advisory_lock(k) FROM (VALUES (1),(2)) AS k(k)
//	UNION ALL SELECT pg_advisory_lock(a,b) FROM (VALUES (3,4)) AS p(a,b)
//
// A VALUES list has no length limit, unlike a select list (1664 entries).
// The caller sorts the keys, bigints before pairs, and the server takes
// them in that order.
func Lock(xact, shared bool, args ...string) string {
	name := fn("pg_advisory", xact, shared)
	if len(args) == 1 {
		return "SELECT " + name + "(" + args[0] + ")"
	}
	return perKey("SELECT "+name+"(k) FROM ", "SELECT "+name+"(a,b) FROM ", "", args)
}

// TryLock returns the statement that tries one key without waiting. It
// affects one row when the lock was taken and none when it was not:
// "SELECT 1 WHERE pg_try_advisory_lock(42)".
func TryLock(xact, shared bool, arg string) string {
	return "SELECT 1 WHERE " + fn("pg_try_advisory", xact, shared) + "(" + arg + ")"
}

// Unlock returns the statement that releases one session lock on every key
// in args. It affects one row for each key that was held. One key gives
// "SELECT 1 WHERE pg_advisory_unlock(42)"; several give, as [Lock] does,
// one row per key:
//
//	SELECT 1 FROM (VALUES (1),(2)) AS k(k) WHERE pg_advisory_unlock(k)
//	UNION ALL SELECT 1 FROM (VALUES (3,4)) AS p(a,b) WHERE pg_advisory_unlock(a,b)
func Unlock(shared bool, args ...string) string {
	name := "pg_advisory_unlock"
	if shared {
		name += "_shared"
	}
	if len(args) == 1 {
		return "SELECT 1 WHERE " + name + "(" + args[0] + ")"
	}
	return perKey("SELECT 1 FROM ", "SELECT 1 FROM ", name, args)
}

// perKey builds a statement with one row per key: the bigint keys in args
// as a VALUES list named k(k), the pair keys as one named p(a,b), each
// after its select prefix and, when filter names a function, filtered by
// it. Keys keep their order within each list.
func perKey(bigintSelect, pairSelect, filter string, args []string) string {
	var bigints, pairs []string
	for _, a := range args {
		if strings.Contains(a, ",") {
			pairs = append(pairs, a)
		} else {
			bigints = append(bigints, a)
		}
	}
	var parts []string
	if len(bigints) > 0 {
		q := bigintSelect + values(bigints) + " AS k(k)"
		if filter != "" {
			q += " WHERE " + filter + "(k)"
		}
		parts = append(parts, q)
	}
	if len(pairs) > 0 {
		q := pairSelect + values(pairs) + " AS p(a,b)"
		if filter != "" {
			q += " WHERE " + filter + "(a,b)"
		}
		parts = append(parts, q)
	}
	return strings.Join(parts, " UNION ALL ")
}

// values renders "(VALUES (1),(2))".
func values(args []string) string {
	var b strings.Builder
	b.WriteString("(VALUES ")
	for i, a := range args {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('(')
		b.WriteString(a)
		b.WriteByte(')')
	}
	b.WriteByte(')')
	return b.String()
}

// UnlockAll releases every session lock the session holds.
const UnlockAll = "SELECT pg_advisory_unlock_all()"

// LockTimeout wraps a lock statement so that the server gives up waiting
// after ms milliseconds with SQLSTATE 55P03, in the same round trip.
//
// The setting is SET LOCAL, so it never outlives the transaction. Outside a
// transaction block, the two statements of one simple query run as one
// implicit transaction, and the setting ends with it while a session lock
// stays. Inside a transaction (xact true) a third statement puts the
// setting back to its default, so the rest of the transaction runs as it
// would have.
func LockTimeout(stmt string, ms int64, xact bool) string {
	s := "SET LOCAL lock_timeout = " + strconv.FormatInt(ms, 10) + "; " + stmt
	if xact {
		s += "; SET LOCAL lock_timeout TO DEFAULT"
	}
	return s
}
