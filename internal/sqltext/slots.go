package sqltext

import (
	"strconv"
	"strings"
)

// SlotTry returns the statement that tries the slots of a semaphore in
// order and takes the first it can. Its one row, if any, is the slot's
// place in order, from 1; no row means every slot is taken:
//
//	SELECT o FROM pg_catalog.unnest(ARRAY[2,3,1]::pg_catalog.int8[]) WITH
//	ORDINALITY AS s(k, o) WHERE pg_catalog.pg_try_advisory_lock(k) LIMIT 1
//
// It has no ORDER BY, so that the filter runs row by row and LIMIT stops
// it at the first lock taken. The slots are keys of one key space, and a
// pair's slots share their first integer. In the Params form the slots go
// as one array parameter, $1, and a pair's first integer as $2, so that
// the text is the same for every order: pgx prepares it once per
// connection, not once per order. order must not be empty.
func SlotTry(f Form, order []Key) Stmt {
	pair := order[0].Pair
	typ := "pg_catalog.int8[]"
	if pair {
		typ = "pg_catalog.int4[]"
	}
	var slots, ns string
	var args []any
	if f == Params {
		slots, args = "$1::"+typ, []any{slotArray(order)}
		if pair {
			ns, args = "$2::pg_catalog.int4, ", append(args, order[0].A)
		}
	} else {
		slots = "ARRAY[" + slotList(order) + "]::" + typ
		if pair {
			ns = strconv.FormatInt(int64(order[0].A), 10) + ", "
		}
	}
	return Stmt{
		Query: "SELECT o FROM pg_catalog.unnest(" + slots + ") WITH ORDINALITY AS s(k, o) WHERE " +
			fn("pg_try_advisory", false, false) + "(" + ns + "k) LIMIT 1",
		Args: args,
	}
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
