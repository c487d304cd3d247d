package reqlock

import (
	"errors"
	"fmt"
	"math"
	"strconv"
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

// ParseInt reads v, the value of what, as a plain decimal integer that
// fits in bits bits (32 or 64): an optional sign and digits, nothing else.
// A missing value, anything else, or an integer out of range is an error
// from [Invalid].
func ParseInt(what, v string, bits int) (int64, error) {
	if v == "" {
		return 0, Invalid(what, "", "missing")
	}
	id, err := strconv.ParseInt(v, 10, bits)
	if err == nil {
		return id, nil
	}
	if errors.Is(err, strconv.ErrRange) {
		lo, hi := int64(math.MinInt32), int64(math.MaxInt32)
		if bits == 64 {
			lo, hi = math.MinInt64, math.MaxInt64
		}
		return 0, Invalid(what, v, fmt.Sprintf("out of range [%d, %d]", lo, hi))
	}
	return 0, Invalid(what, v, "not a decimal integer")
}
