package advisory

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

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

// UnmarshalText reads a key as [ParseKey] does: what [Key.MarshalText]
// writes, or a name key such as "7:nightly".
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

// ParseKey reads a key written as text. It reads back every string that
// [Key.String] writes, and one more form, for keys made by [NameKey]:
//
//	42          Int64Key(42)
//	-42         Int64Key(-42)
//	1:1234      PairKey(1, 1234)
//	7:nightly   NameKey(7, "nightly"), the lock pg_advisory_lock(7, hashtext('nightly')) takes
//	7:"2024"    NameKey(7, "2024"): a quoted name
//
// Numbers are decimal and canonical, as strconv.FormatInt writes them: no
// '+', no leading zeros, no "-0", so that a number has one spelling. The
// number before a colon is an int32, the namespace.
//
// After the colon, text that begins with a digit or a sign is a number, an
// int32; anything else is a name, hashed with [HashText]. A name that
// begins with a digit, a sign, a colon, a double quote or white space,
// that ends with white space, or that is empty, is written as a Go
// double-quoted string ([strconv.Quote]): 7:"2024-report", 7:"-x", 7:"".
// Any name may be quoted. So "1:1234" is always the pair, and "1:1_000",
// "1:2:3" and "1::2" are errors, not names. No name may hold a NUL byte,
// which PostgreSQL text cannot.
//
// [Key.String] writes a name key as its pair of numbers, since a key does
// not keep its name: ParseKey("7:nightly").String() is "7:" followed by
// HashText("nightly"). A string in none of these forms is an error that
// wraps [ErrBadKey] and says what is wrong; ParseKey never panics.
func ParseKey(s string) (Key, error) {
	k, why := parseKey(s)
	if why != "" {
		return Key{}, fmt.Errorf("%w %s: %s", ErrBadKey, quoteShort(s), why)
	}
	return k, nil
}

// maxQuotedKey is how many bytes of a malformed key, or of a part of it,
// an error message shows.
const maxQuotedKey = 64

// quoteShort quotes s for an error message, cut to [maxQuotedKey] bytes.
func quoteShort(s string) string {
	if len(s) > maxQuotedKey {
		return strconv.Quote(s[:maxQuotedKey]) + "..."
	}
	return strconv.Quote(s)
}

// parseKey reads s as [ParseKey] does, and says why when s is not a key.
func parseKey(s string) (Key, string) {
	left, right, isPair := strings.Cut(s, ":")
	if !isPair {
		switch {
		case s == "":
			return Key{}, "empty"
		case !numeric(s):
			return Key{}, "a name needs a namespace, as in 7:" + bareOrQuoted(s)
		}
		v, why := parseNumber(s, 64)
		if why != "" {
			return Key{}, why
		}
		return Int64Key(v), ""
	}
	if left == "" {
		return Key{}, "empty namespace before the colon"
	}
	if !numeric(left) {
		return Key{}, "the namespace " + quoteShort(left) + " is not a number; it must be an int32"
	}
	ns, why := parseNumber(left, 32)
	if why != "" {
		return Key{}, "namespace " + why
	}
	if numeric(right) {
		v, why := parseNumber(right, 32)
		if why != "" && !allDigits(strings.TrimLeft(right, "+-")) {
			why += `; a name that begins with a digit or a sign is quoted, as in 7:"2024-report"`
		}
		if why != "" {
			return Key{}, "after the colon, " + why
		}
		return PairKey(int32(ns), int32(v)), ""
	}
	name, why := parseName(right)
	if why != "" {
		return Key{}, why
	}
	return NameKey(int32(ns), name), ""
}

// numeric reports whether s, after the colon, is read as a number: it
// begins with a decimal digit or a sign.
func numeric(s string) bool {
	return s != "" && (s[0] >= '0' && s[0] <= '9' || s[0] == '-' || s[0] == '+')
}

// allDigits reports whether s is decimal digits only.
func allDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// parseNumber parses s as a canonical decimal integer of the given bit
// size, 32 or 64, and says why when it is not one.
func parseNumber(s string, bits int) (int64, string) {
	v, err := strconv.ParseInt(s, 10, bits)
	switch {
	case errors.Is(err, strconv.ErrRange):
		if bits == 32 {
			return 0, quoteShort(s) + " is out of the range of an int32 (int4)"
		}
		return 0, quoteShort(s) + " is out of the range of an int64 (bigint)"
	case err != nil:
		return 0, quoteShort(s) + " is not a decimal integer"
	case strconv.FormatInt(v, 10) != s:
		return 0, quoteShort(s) + " is not written canonically (no '+', no leading zeros, no -0); write " + strconv.FormatInt(v, 10)
	}
	return v, ""
}

// parseName reads the name after a colon: bare or quoted, as [ParseKey]
// says.
func parseName(s string) (string, string) {
	switch {
	case s == "":
		return "", `empty name after the colon; the empty name is written ""`
	case s[0] == '"':
		name, err := strconv.Unquote(s)
		if err != nil {
			return "", "a name that begins with a double quote must be one Go double-quoted string, as strconv.Quote writes it"
		}
		if strings.IndexByte(name, 0) >= 0 {
			return "", "a name cannot hold a NUL byte, which PostgreSQL text cannot"
		}
		return name, ""
	case strings.IndexByte(s, 0) >= 0:
		return "", "a name cannot hold a NUL byte, which PostgreSQL text cannot"
	case needsQuotes(s):
		return "", "a name that begins with a colon or white space, or ends with white space, is quoted: " + quoteShort(s)
	}
	return s, ""
}

// needsQuotes reports whether name, after a colon, must be quoted to be
// read as itself.
func needsQuotes(name string) bool {
	if name == "" || numeric(name) || name[0] == '"' || name[0] == ':' {
		return true
	}
	first, _ := utf8.DecodeRuneInString(name)
	last, _ := utf8.DecodeLastRuneInString(name)
	return unicode.IsSpace(first) || unicode.IsSpace(last)
}

// bareOrQuoted writes name as it goes after a colon.
func bareOrQuoted(name string) string {
	if needsQuotes(name) || len(name) > maxQuotedKey {
		return quoteShort(name)
	}
	return name
}

// canonical returns keys sorted by [Key.Compare] with duplicates removed,
// leaving the caller's slice untouched.
func canonical(keys []Key) []Key {
	out := slices.Clone(keys)
	slices.SortFunc(out, Key.Compare)
	return slices.Compact(out)
}
