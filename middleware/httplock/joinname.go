package httplock

import (
	"strconv"
	"strings"
)

// JoinName joins values into the one name that [PathNameKey] and
// [ValueNameKey] hash, so that code outside HTTP can take the same lock
// with advisory.NameKey(ns, JoinName(values...)).
//
// One value is returned as it is, so that a one-parameter key is the one
// pg_advisory_xact_lock(ns, hashtext(value)) takes. Several are each
// written as their length in bytes, in decimal, a colon, and the value:
// JoinName("a/b", "c") is "3:a/b1:c" and JoinName("a", "b/c") is
// "1:a3:b/c". In SQL the same name is
// octet_length(a) || ':' || a || octet_length(b) || ':' || b.
//
// Two lists of the same length join alike only if they are equal. Lists
// of different lengths can: JoinName("1:a1:b") and JoinName("a", "b") are
// both "1:a1:b". So give each namespace one fixed list of parameters.
func JoinName(values ...string) string {
	if len(values) == 1 {
		return values[0]
	}
	n := 0
	for _, v := range values {
		n += len(v) + 21
	}
	var b strings.Builder
	b.Grow(n)
	for _, v := range values {
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte(':')
		b.WriteString(v)
	}
	return b.String()
}
