package advisory

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// Key names an advisory lock. PostgreSQL has two key spaces that never
// conflict with each other: a single bigint, made with [Int64Key], and a
// pair of integers, made with [PairKey] or [NameKey]. Key is a comparable
// value, so it can be used as a map key; its zero value is Int64Key(0).
type Key struct {
	pair bool
	hi   int32 // the pair's first half, or the high 32 bits of the bigint
	lo   int32 // the pair's second half, or the low 32 bits of the bigint
}

// Int64Key returns the key that pg_advisory_lock(bigint) takes.
func Int64Key(k int64) Key {
	return Key{hi: int32(k >> 32), lo: int32(k)}
}

// PairKey returns the key that pg_advisory_lock(int, int) takes. It never
// conflicts with an [Int64Key], whatever the numbers.
func PairKey(k1, k2 int32) Key {
	return Key{pair: true, hi: k1, lo: k2}
}

// NameKey returns PairKey(ns, HashText(name)): the same key as
// pg_advisory_lock(ns, hashtext(name)) in hand-written SQL, computed without
// a round trip. Names that hash alike share a lock; see [HashText].
func NameKey(ns int32, name string) Key {
	return PairKey(ns, HashText(name))
}

// IsPair reports whether k is in the (int, int) key space.
func (k Key) IsPair() bool { return k.pair }

// Int64 returns the bigint of a key made by [Int64Key]. ok is false for a
// pair key.
func (k Key) Int64() (v int64, ok bool) {
	if k.pair {
		return 0, false
	}
	return int64(k.hi)<<32 | int64(uint32(k.lo)), true
}

// Pair returns the two halves of a key made by [PairKey] or [NameKey]. ok
// is false for a bigint key.
func (k Key) Pair() (k1, k2 int32, ok bool) {
	if !k.pair {
		return 0, 0, false
	}
	return k.hi, k.lo, true
}

// String returns "42" for Int64Key(42) and "1:1234" for PairKey(1, 1234).
// [ParseKey] reads it back.
func (k Key) String() string { return k.sql().String() }

// Compare returns -1, 0 or +1 as k sorts before, equal to or after o. All
// bigint keys sort before all pair keys, and keys of one space sort by
// their numbers. The multi-key lock functions take keys in this order, so
// that two callers locking the same set never deadlock.
func (k Key) Compare(o Key) int {
	if k.pair != o.pair {
		if k.pair {
			return 1
		}
		return -1
	}
	if c := cmp.Compare(k.hi, o.hi); c != 0 {
		return c
	}
	if k.pair {
		return cmp.Compare(k.lo, o.lo)
	}
	return cmp.Compare(uint32(k.lo), uint32(o.lo))
}

// sql returns the key as a statement needs it.
func (k Key) sql() sqltext.Key { return sqltext.KeyOf(k) }

// MarshalText returns [Key.String], so that a key reads and writes as text
// in JSON, configuration files and flags.
func (k Key) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads a key written by [Key.MarshalText], as [ParseKey]
// does.
func (k *Key) UnmarshalText(text []byte) error {
	v, err := ParseKey(string(text))
	if err != nil {
		return err
	}
	*k = v
	return nil
}

// ErrBadKey is returned, wrapped, by [ParseKey] for a string that is not a
// key.
var ErrBadKey = errors.New("advisory: malformed key")

// ParseKey reads a key written by [Key.String]: a decimal bigint such as
// "-42", or two decimal int32 halves joined by a colon, such as "1:1234".
// Only the canonical form is accepted, the one Key.String writes: no sign
// but a leading '-', no leading zeros, no "-0", so that each key has one
// spelling.
func ParseKey(s string) (Key, error) {
	a, b, isPair := strings.Cut(s, ":")
	if !isPair {
		v, ok := parseCanonical(s, 64)
		if !ok {
			return Key{}, fmt.Errorf("%w %q: want a bigint or two int32 joined by ':', written as Key.String writes them", ErrBadKey, s)
		}
		return Int64Key(v), nil
	}
	k1, ok1 := parseCanonical(a, 32)
	k2, ok2 := parseCanonical(b, 32)
	if !ok1 || !ok2 {
		return Key{}, fmt.Errorf("%w %q: each half of a pair key must be an int32, written as Key.String writes it", ErrBadKey, s)
	}
	return PairKey(int32(k1), int32(k2)), nil
}

// parseCanonical parses s as a decimal integer of the given bit size, and
// reports whether s is exactly how strconv.FormatInt writes that integer.
func parseCanonical(s string, bits int) (int64, bool) {
	v, err := strconv.ParseInt(s, 10, bits)
	if err != nil || strconv.FormatInt(v, 10) != s {
		return 0, false
	}
	return v, true
}

// canonical returns keys sorted by [Key.Compare] with duplicates removed,
// leaving the caller's slice untouched.
func canonical(keys []Key) []Key {
	out := slices.Clone(keys)
	slices.SortFunc(out, Key.Compare)
	return slices.Compact(out)
}
