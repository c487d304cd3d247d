package httplock_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/httplock"
)

// The fuzz targets run their seed corpus with every go test; run one with,
// for example, go test -run '^$' -fuzz FuzzPathKey ./middleware/httplock.

// canonicalID reports whether v is an id that the key functions accept:
// a nonzero integer of bits bits, written as strconv.FormatInt writes it.
func canonicalID(v string, bits int) (int64, bool) {
	id, err := strconv.ParseInt(v, 10, bits)
	return id, err == nil && id != 0 && strconv.FormatInt(id, 10) == v
}

func FuzzPathKey(f *testing.F) {
	for _, s := range []string{"42", "-1", "0", "+7", "0042", "2147483647", "2147483648", "-2147483649",
		"", " 1", "1 ", "0x10", "1e3", "١٢", "\xff", "9223372036854775808", strings.Repeat("1", 4096),
		"-0", "+0", "00", "-07", strings.Repeat("0", 1000) + "1"} {
		f.Add(int32(7), s)
	}
	f.Fuzz(func(t *testing.T, ns int32, v string) {
		key, err := httplock.PathKey(ns, "id")(withPath("id", v))
		id, ok := canonicalID(v, 32)
		switch {
		case !ok:
			if !errors.Is(err, httplock.ErrBadKey) {
				t.Fatalf("PathKey(%q) = %v, %v; want ErrBadKey", v, key, err)
			}
			if len(err.Error()) > 300 {
				t.Fatalf("error of %d bytes", len(err.Error()))
			}
		case err != nil || key != advisory.PairKey(ns, int32(id)):
			t.Fatalf("PathKey(%q) = %v, %v; want %v", v, key, err, advisory.PairKey(ns, int32(id)))
		}
	})
}

func FuzzPathInt64Key(f *testing.F) {
	for _, s := range []string{"42", "-9223372036854775808", "9223372036854775807", "9223372036854775808",
		"", "-", "+", "00", "1_000", "\x00", "0", "-0", "+1", "007"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		key, err := httplock.PathInt64Key("id")(withPath("id", v))
		id, ok := canonicalID(v, 64)
		switch {
		case !ok:
			if !errors.Is(err, httplock.ErrBadKey) {
				t.Fatalf("PathInt64Key(%q) = %v, %v; want ErrBadKey", v, key, err)
			}
		case err != nil || key != advisory.Int64Key(id):
			t.Fatalf("PathInt64Key(%q) = %v, %v; want %v", v, key, err, advisory.Int64Key(id))
		}
	})
}

func FuzzPathNameKey(f *testing.F) {
	seeds := [][2]string{{"a/b", "c"}, {"a", "b/c"}, {"", "x"}, {"1:", "a"}, {"\xff", "\x00"}, {"acme", "42"},
		{strings.Repeat("x", 10000), "y"}}
	for _, s := range seeds {
		f.Add(int32(9), s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, ns int32, a, b string) {
		key, err := httplock.PathNameKey(ns, "a", "b")(withPath("a", a, "b", b))
		if a == "" || b == "" {
			if !errors.Is(err, httplock.ErrBadKey) {
				t.Fatalf("PathNameKey(%q, %q) = %v, %v; want ErrBadKey", a, b, key, err)
			}
			return
		}
		if err != nil || key != advisory.NameKey(ns, httplock.JoinName(a, b)) {
			t.Fatalf("PathNameKey(%q, %q) = %v, %v", a, b, key, err)
		}
		one, err := httplock.PathNameKey(ns, "a")(withPath("a", a))
		if err != nil || one != advisory.NameKey(ns, a) {
			t.Fatalf("PathNameKey(%q) = %v, %v; want NameKey(ns, value)", a, one, err)
		}
	})
}

// FuzzJoinName checks that JoinName is injective on pairs: two pairs join
// alike only if they are equal.
func FuzzJoinName(f *testing.F) {
	f.Add("a/b", "c", "a", "b/c")
	f.Add("1:a", "b", "1", "a1:b")
	f.Add("", "", "", "")
	f.Add("12:", "x", "1", "2:x")
	f.Fuzz(func(t *testing.T, a, b, c, d string) {
		if (httplock.JoinName(a, b) == httplock.JoinName(c, d)) != (a == c && b == d) {
			t.Fatalf("JoinName(%q, %q) = %q, JoinName(%q, %q) = %q", a, b, httplock.JoinName(a, b),
				c, d, httplock.JoinName(c, d))
		}
	})
}
