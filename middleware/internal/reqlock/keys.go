package reqlock

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// The rules for the values that the transports' key functions read from a
// request, in one place. Both transports name their key functions alike:
// …Key for an int32 id, …Int64Key for a bigint id, …NameKey for a hashed
// name.
//
//   - An id is a nonzero integer that fits its key: an int32 for
//     advisory.PairKey(ns, id), an int64 for advisory.Int64Key(id). Zero
//     is never an id, because a protobuf field that was never set reads
//     as 0.
//   - An id written as text must be canonical decimal, as
//     strconv.FormatInt writes it: digits without leading zeros, after a
//     minus sign for a negative id. "+1", "007" and "-0" are errors, so
//     that one resource has one spelling, and so one key.
//   - A name, hashed with advisory.NameKey, is any non-empty string of
//     bytes.

var (
	// ErrNoLock is the class that the transports' ErrNoLock values
	// match with errors.Is (their types' Is methods say so), and that
	// both transports test for, so that either value is honoured by
	// both. The transports' values are their own, so that their go doc
	// names nothing internal.
	ErrNoLock = errors.New("no lock for this request")

	// ErrBadKey is the class that the transports' ErrBadKey values
	// match, as for ErrNoLock.
	ErrBadKey = errors.New("bad lock key")
)

// MaxQuoted is how many bytes of a bad value an error message shows.
const MaxQuoted = 32

// Invalid returns an error saying that value, the value of what (such as
// `path parameter "id"`), names no key, because of why. The value is
// quoted and cut to [MaxQuoted] bytes, so that a huge or binary value
// makes a short, printable message; an empty value is not shown. The
// error wraps nothing: callers wrap it in their bad-key sentinel.
func Invalid(what, value, why string) error {
	if value == "" {
		return fmt.Errorf("%s: %s", what, why)
	}
	q := value
	if len(q) > MaxQuoted {
		q = q[:MaxQuoted] + "..."
	}
	return fmt.Errorf("%s = %q: %s", what, q, why)
}

// bounds returns the range of an id of bits bits, 32 or 64.
func bounds(bits int) (lo, hi int64) {
	if bits == 32 {
		return math.MinInt32, math.MaxInt32
	}
	return math.MinInt64, math.MaxInt64
}

// ParseID reads v, the value of what, as an id of bits bits (32 or 64):
// canonical decimal, nonzero and in range. Anything else is an error from
// [Invalid].
func ParseID(what, v string, bits int) (int64, error) {
	if v == "" {
		return 0, Invalid(what, "", "missing")
	}
	if !canonical(v) {
		if _, err := strconv.ParseInt(v, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
			return 0, Invalid(what, v, "not canonical decimal (no sign but '-', no leading zeros)")
		}
		return 0, Invalid(what, v, "not a decimal integer")
	}
	id, err := strconv.ParseInt(v, 10, bits)
	if err != nil { // canonical, so only out of range
		lo, hi := bounds(bits)
		return 0, Invalid(what, v, fmt.Sprintf("out of range [%d, %d]", lo, hi))
	}
	return id, CheckID(what, id, bits)
}

// canonical reports whether v is written as strconv.FormatInt writes an
// integer: "0", or an optional '-' and digits that do not start with 0.
func canonical(v string) bool {
	if v == "0" {
		return true
	}
	if len(v) > 0 && v[0] == '-' {
		v = v[1:]
	}
	if v == "" || v[0] < '1' || v[0] > '9' {
		return false
	}
	for i := 1; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return false
		}
	}
	return true
}

// CheckID returns an error from [Invalid] if id, the value of what, is not
// an id of bits bits: zero, or out of range.
func CheckID(what string, id int64, bits int) error {
	lo, hi := bounds(bits)
	switch {
	case id == 0:
		return Invalid(what, "", "zero, which is never an id")
	case id < lo || id > hi:
		return Invalid(what, strconv.FormatInt(id, 10), fmt.Sprintf("out of range [%d, %d]", lo, hi))
	}
	return nil
}

// CheckUintID is [CheckID] for an unsigned value.
func CheckUintID(what string, u uint64, bits int) (int64, error) {
	if _, hi := bounds(bits); u > uint64(hi) {
		return 0, Invalid(what, strconv.FormatUint(u, 10), fmt.Sprintf("out of range [1, %d]", hi))
	}
	return int64(u), CheckID(what, int64(u), bits)
}

// Key returns advisory.PairKey(ns, id) for v, the value of what, read as
// an int32 id by [ParseID].
func Key(ns int32, what, v string) (advisory.Key, error) {
	id, err := ParseID(what, v, 32)
	if err != nil {
		return advisory.Key{}, err
	}
	return advisory.PairKey(ns, int32(id)), nil
}

// Int64Key returns advisory.Int64Key(id) for v, the value of what, read as
// an int64 id by [ParseID].
func Int64Key(what, v string) (advisory.Key, error) {
	id, err := ParseID(what, v, 64)
	if err != nil {
		return advisory.Key{}, err
	}
	return advisory.Int64Key(id), nil
}

// CheckName returns an error from [Invalid] if name, the value of what,
// cannot be a name: if it is empty.
func CheckName(what, name string) error {
	if name == "" {
		return Invalid(what, "", "missing")
	}
	return nil
}
