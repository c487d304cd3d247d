// Package sqltext holds every SQL statement the advisory package sends, in
// one place, so that the mock package can expect exactly the same text.
//
// Keys are rendered into the statement with strconv. A key is only
// integers, so nothing can be injected, and a statement without parameters
// costs one round trip on every driver: lib/pq and pgx both send it through
// the simple query protocol, and pgx prepares nothing. The statements about
// one key that every lock call sends, the one that confirms a lease and a
// Locker's fenced try also come in a second form (see [Form]), with the
// key as parameters, for the driver that runs that faster. Statements
// whose answer is a boolean are written so that the answer is the number
// of rows: "SELECT 1 WHERE pg_catalog.pg_advisory_unlock(42)" reports one
// row when the lock was held, and a try reports its answers as zero to
// three rows (see [TryLock]).
// That lets the caller use ExecContext and read RowsAffected, which keeps
// every driver on its no-parameter, single round-trip path.
//
// # Qualified names
//
// Every function, relation and cast type a statement names carries its
// schema: pg_catalog for PostgreSQL's (pg_catalog.pg_advisory_lock,
// pg_catalog.pg_locks, pg_catalog.int8), [Schema] for the library's own
// (the fencing sequence). An unqualified name resolves through the
// session's search_path, which is the caller's: a schema placed before
// pg_catalog could define a pg_try_advisory_lock that always returns
// true, and an unqualified sequence would be one per schema, or none with
// an empty search_path. Operators are left as they are. A test checks
// every statement the package builds.
package sqltext

import (
	"strconv"
	"strings"
)

// Key is a lock key as a statement needs it: the bigint of
// pg_advisory_*(bigint), or the two integers of pg_advisory_*(int, int).
type Key struct {
	Pair   bool  // whether the key is two integers rather than a bigint
	Bigint int64 // when !Pair
	A, B   int32 // when Pair
}

// Keyer is what advisory.Key offers: its number in one of the two key
// spaces. [KeyOf] turns it into a Key, so that advisory and mock share one
// mapping from their key to a statement's.
type Keyer interface {
	Int64() (v int64, ok bool)
	Pair() (k1, k2 int32, ok bool)
}

// KeyOf returns k as a statement needs it.
func KeyOf[K Keyer](k K) Key {
	if a, b, ok := k.Pair(); ok {
		return Key{Pair: true, A: a, B: b}
	}
	v, _ := k.Int64()
	return Key{Bigint: v}
}

// KeysOf returns every key as a statement needs it.
func KeysOf[K Keyer](keys []K) []Key {
	out := make([]Key, len(keys))
	for i, k := range keys {
		out[i] = KeyOf(k)
	}
	return out
}

// String renders the key as advisory.Key.String does: "42" or "1:2".
func (k Key) String() string {
	if k.Pair {
		return strconv.FormatInt(int64(k.A), 10) + ":" + strconv.FormatInt(int64(k.B), 10)
	}
	return strconv.FormatInt(k.Bigint, 10)
}

// args renders the key as a function's argument list: "42" or "1,2".
func (k Key) args() string {
	if k.Pair {
		return strconv.FormatInt(int64(k.A), 10) + "," + strconv.FormatInt(int64(k.B), 10)
	}
	return strconv.FormatInt(k.Bigint, 10)
}

// lockFns names the server functions that take a lock, by whether they
// try, whether the lock is a transaction's, and whether it is shared.
// Like every name in this package's statements, each is qualified with
// its schema (see the package documentation).
var lockFns = [2][2][2]string{
	{
		{"pg_catalog.pg_advisory_lock", "pg_catalog.pg_advisory_lock_shared"},
		{"pg_catalog.pg_advisory_xact_lock", "pg_catalog.pg_advisory_xact_lock_shared"},
	},
	{
		{"pg_catalog.pg_try_advisory_lock", "pg_catalog.pg_try_advisory_lock_shared"},
		{"pg_catalog.pg_try_advisory_xact_lock", "pg_catalog.pg_try_advisory_xact_lock_shared"},
	},
}

// fn names the server function for a scope and a mode; prefix is
// "pg_advisory" or "pg_try_advisory".
func fn(prefix string, xact, shared bool) string {
	return lockFns[b2i(prefix == "pg_try_advisory")][b2i(xact)][b2i(shared)]
}

// b2i is 1 for true and 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// unlockFn names the server function that releases a session lock.
func unlockFn(shared bool) string {
	if shared {
		return "pg_catalog.pg_advisory_unlock_shared"
	}
	return "pg_catalog.pg_advisory_unlock"
}

// call renders "name(args)".
func call(name string, k Key) string { return string(appendCall(nil, name, k)) }

// appendCall appends "name(args)" to b.
func appendCall(b []byte, name string, k Key) []byte {
	b = append(b, name...)
	b = append(b, '(')
	if k.Pair {
		b = strconv.AppendInt(b, int64(k.A), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(k.B), 10)
	} else {
		b = strconv.AppendInt(b, k.Bigint, 10)
	}
	return append(b, ')')
}

// statement renders prefix + "name(args)" + suffix with one allocation,
// for the statements every lock call sends.
func statement(prefix, name string, k Key, suffix string) string {
	var buf [512]byte
	b := append(buf[:0], prefix...)
	b = appendCall(b, name, k)
	return string(append(b, suffix...))
}

// Lock returns the statement that waits for every key, in the order given.
// One key gives "SELECT pg_catalog.pg_advisory_lock(42)". Several give one
// row per key, taken as the rows are produced:
//
//	SELECT pg_catalog.pg_advisory_lock(k) FROM (VALUES (1),(2)) AS k(k)
//	UNION ALL SELECT pg_catalog.pg_advisory_lock(a,b) FROM (VALUES (3,4)) AS p(a,b)
//
// A VALUES list has no length limit, unlike a select list (1664 entries).
// The caller sorts the keys, bigints before pairs, and the server takes
// them in that order.
func Lock(xact, shared bool, keys ...Key) string {
	name := fn("pg_advisory", xact, shared)
	if len(keys) == 1 {
		return statement("SELECT ", name, keys[0], "")
	}
	return perKey("SELECT "+name+"(k) FROM ", "SELECT "+name+"(a,b) FROM ", "", keys)
}

// TryLock returns the statement that tries one key without waiting,
// guarded by g (see [Guard]). The rows it affects are its answer:
// [TryTaken] when the lock was taken, [TryBusy] when it was not, and
// [TryStandby] or [TryShared] when it refused and took nothing:
//
//	SELECT 1 FROM pg_catalog.generate_series(1, CASE WHEN
//	pg_catalog.pg_is_in_recovery() THEN 2 WHEN
//	COALESCE(pg_catalog.current_setting('pgadvisory.lease', true), '') <> '' THEN 3 WHEN
//	pg_catalog.pg_try_advisory_lock(42) THEN 1 ELSE 0 END)
func TryLock(g Guard, xact, shared bool, key Key) string {
	return statement(tryPrefix(g), fn("pg_try_advisory", xact, shared), key, trySuffix)
}

// Unlock returns the statement that releases one session lock on every
// key. It affects one row for each key that was held. One key gives
// "SELECT 1 WHERE pg_catalog.pg_advisory_unlock(42)"; several give, as
// [Lock] does, one row per key:
//
//	SELECT 1 FROM (VALUES (1),(2)) AS k(k) WHERE pg_catalog.pg_advisory_unlock(k)
//	UNION ALL SELECT 1 FROM (VALUES (3,4)) AS p(a,b) WHERE pg_catalog.pg_advisory_unlock(a,b)
func Unlock(shared bool, keys ...Key) string {
	name := unlockFn(shared)
	if len(keys) == 1 {
		return statement("SELECT 1 WHERE ", name, keys[0], "")
	}
	return perKey("SELECT 1 FROM ", "SELECT 1 FROM ", name, keys)
}

// EndScope returns the statement that ends a session scope that holds
// its lock without a heartbeat (one with a heartbeat ends as a lease,
// with [LeaseEnd]): it releases key and, when all is set and key was
// held, every other session lock as well, so that nothing the scope's
// function took goes back to the pool. It also tells whether the function
// left a transaction block open on the session, since
// statement_timestamp() equals transaction_timestamp() only in a
// transaction's first statement. It affects one row when key was held,
// and two more when a transaction is open:
//
//	SELECT 1 FROM pg_catalog.generate_series(1, CASE WHEN CASE WHEN
//	pg_catalog.pg_advisory_unlock(42) THEN
//	pg_catalog.pg_advisory_unlock_all() IS NOT NULL ELSE false END THEN 1
//	ELSE 0 END + CASE WHEN pg_catalog.statement_timestamp() =
//	pg_catalog.transaction_timestamp() THEN 0 ELSE 2 END)
//
// CASE fixes the order: the key's own release decides the answer before
// anything else is released. In a transaction that has failed, the
// statement fails with SQLSTATE 25P02 and releases nothing.
func EndScope(shared, all bool, key Key) string {
	held := call(unlockFn(shared), key)
	if all {
		held = "CASE WHEN " + held + " THEN pg_catalog.pg_advisory_unlock_all() IS NOT NULL ELSE false END"
	}
	return "SELECT 1 FROM pg_catalog.generate_series(1, CASE WHEN " + held + " THEN 1 ELSE 0 END + " +
		"CASE WHEN pg_catalog.statement_timestamp() = pg_catalog.transaction_timestamp() THEN 0 ELSE 2 END)"
}

// UnlockAll releases every session lock the session holds, and removes a
// lease's mark from it (see [ClearMark]): a lease holds nothing after it.
const UnlockAll = "SELECT pg_catalog.pg_advisory_unlock_all(), " + ClearMark

// perKey builds a statement with one row per key: the bigint keys as a
// VALUES list named k(k), the pair keys as one named p(a,b), each after its
// select prefix and, when filter names a function, filtered by it. Keys
// keep their order within each list.
func perKey(bigintSelect, pairSelect, filter string, keys []Key) string {
	var bigints, pairs []Key
	for _, k := range keys {
		if k.Pair {
			pairs = append(pairs, k)
		} else {
			bigints = append(bigints, k)
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
func values(keys []Key) string {
	var b strings.Builder
	b.WriteString("(VALUES ")
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(" + k.args() + ")")
	}
	b.WriteByte(')')
	return b.String()
}
