package advisory_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
)

func TestKeyString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		key  advisory.Key
		want string
	}{
		{"Zero", advisory.Key{}, "0"},
		{"Int64", advisory.Int64Key(42), "42"},
		{"Int64Negative", advisory.Int64Key(-42), "-42"},
		{"Int64Min", advisory.Int64Key(math.MinInt64), "-9223372036854775808"},
		{"Int64Max", advisory.Int64Key(math.MaxInt64), "9223372036854775807"},
		{"Int64HighBits", advisory.Int64Key(1<<32 | 2), "4294967298"},
		{"Pair", advisory.PairKey(1, 1234), "1:1234"},
		{"PairNegative", advisory.PairKey(-1, -2), "-1:-2"},
		{"PairExtremes", advisory.PairKey(math.MinInt32, math.MaxInt32), "-2147483648:2147483647"},
		{"Name", advisory.NameKey(100, "abc"), "100:-785388649"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.key.String(); got != tt.want {
				t.Fatalf("String() = %q, want %q", got, tt.want)
			}
			back, err := advisory.ParseKey(tt.want)
			if err != nil {
				t.Fatalf("ParseKey(%q): %v", tt.want, err)
			}
			if back != tt.key {
				t.Fatalf("ParseKey(%q) = %v, want %v", tt.want, back, tt.key)
			}
		})
	}
}

func TestParseKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want advisory.Key
	}{
		{"Int64", "42", advisory.Int64Key(42)},
		{"Int64Negative", "-42", advisory.Int64Key(-42)},
		{"Int64Min", "-9223372036854775808", advisory.Int64Key(math.MinInt64)},
		{"Pair", "1:1234", advisory.PairKey(1, 1234)},
		{"PairNegative", "-1:-2", advisory.PairKey(-1, -2)},
		{"PairExtremes", "-2147483648:2147483647", advisory.PairKey(math.MinInt32, math.MaxInt32)},
		{"Name", "7:nightly", advisory.NameKey(7, "nightly")},
		{"NameNegativeNamespace", "-7:nightly", advisory.NameKey(-7, "nightly")},
		{"NameWithColon", "7:a:b", advisory.NameKey(7, "a:b")},
		{"NameWithSpace", "7:nightly report", advisory.NameKey(7, "nightly report")},
		{"NameWithQuoteInside", `7:a"b`, advisory.NameKey(7, `a"b`)},
		{"NameUnicode", "7:café", advisory.NameKey(7, "café")},
		{"NameUnderscore", "100:sync_inventory", advisory.NameKey(100, "sync_inventory")},
		{"QuotedName", `7:"nightly"`, advisory.NameKey(7, "nightly")},
		{"QuotedDigits", `1:"1234"`, advisory.NameKey(1, "1234")},
		{"QuotedLeadingDigit", `7:"2024-report"`, advisory.NameKey(7, "2024-report")},
		{"QuotedSign", `7:"-x"`, advisory.NameKey(7, "-x")},
		{"QuotedColon", `7:":x"`, advisory.NameKey(7, ":x")},
		{"QuotedSpaces", `7:" x "`, advisory.NameKey(7, " x ")},
		{"QuotedEmpty", `7:""`, advisory.NameKey(7, "")},
		{"QuotedEscapes", `7:"a\tb\u00e9"`, advisory.NameKey(7, "a\tbé")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := advisory.ParseKey(tt.in)
			if err != nil || got != tt.want {
				t.Fatalf("ParseKey(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
			var u advisory.Key
			if err := u.UnmarshalText([]byte(tt.in)); err != nil || u != tt.want {
				t.Fatalf("UnmarshalText(%q) = %v, %v; want %v", tt.in, u, err, tt.want)
			}
		})
	}
	// A quoted digit string is a name, never the pair it spells.
	if k, _ := advisory.ParseKey(`1:"1234"`); k == advisory.PairKey(1, 1234) {
		t.Error(`ParseKey("1:\"1234\"") is the pair 1:1234; want the name "1234"`)
	}
}

func TestParseKeyRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want string // in the message
	}{
		{"", "empty"},
		{" 42", "a name needs a namespace"},
		{"42 ", "not a decimal integer"},
		{"4x", "not a decimal integer"},
		{"0x10", "not a decimal integer"},
		{"1,2", "not a decimal integer"},
		{"1_000", "not a decimal integer"},
		{"nightly", "a name needs a namespace, as in 7:nightly"},
		{"2024-report", "not a decimal integer"},
		{"9223372036854775808", "out of the range of an int64"},
		{"-9223372036854775809", "out of the range of an int64"},
		{"+1", "not written canonically"},
		{"007", "write 7"},
		{"-0", "write 0"},
		{"00", "not written canonically"},
		{"-01", "write -1"},
		{strings.Repeat("0", 1000) + "1", "not written canonically"},
		{strings.Repeat("9", 1000), "out of the range of an int64"},
		{strings.Repeat("x", 1000), "a name needs a namespace"},
		{"1:", "empty name after the colon"},
		{":1", "empty namespace"},
		{":x", "empty namespace"},
		{"a:b", `the namespace "a" is not a number`},
		{"billing:nightly", `the namespace "billing" is not a number`},
		{"01:2", `namespace "01" is not written canonically`},
		{"+1:2", `namespace "+1" is not written canonically`},
		{"2147483648:0", `namespace "2147483648" is out of the range of an int32`},
		{"1:2:3", `"2:3" is not a decimal integer; a name that begins with a digit or a sign is quoted`},
		{"1:1_000", "a name that begins with a digit or a sign is quoted"},
		{"1:2024-report", `as in 7:"2024-report"`},
		{"0:-2147483649", "out of the range of an int32"},
		{"1:+2", "not written canonically"},
		{"1:-0", "write 0"},
		{"0:00", "write 0"},
		{"1::2", `is quoted: ":2"`},
		{"7: x", `is quoted: " x"`},
		{"7:x ", `is quoted: "x "`},
		{"7:x\t", `is quoted: "x\t"`},
		{`7:"x`, "double-quoted string"},
		{`7:"x"y`, "double-quoted string"},
		{`7:'x'`, ""}, // a bare name that happens to hold quotes: accepted, see below
		{"7:a\x00b", "NUL byte"},
		{`7:"a\x00b"`, "NUL byte"},
		{"7:" + strings.Repeat("9", 200), "out of the range"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%.20q", tt.in), func(t *testing.T) {
			t.Parallel()
			k, err := advisory.ParseKey(tt.in)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("ParseKey(%q): %v; want a name key", tt.in, err)
				}
				return
			}
			if !errors.Is(err, advisory.ErrBadKey) {
				t.Fatalf("ParseKey(%q) = %v, %v; want ErrBadKey", tt.in, k, err)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "advisory: malformed key ") || !strings.Contains(msg, tt.want) {
				t.Errorf("ParseKey(%q): %q; want a message saying %q", tt.in, msg, tt.want)
			}
			if len(err.Error()) > 300 {
				t.Errorf("ParseKey(%.20q): a message of %d bytes; want it short", tt.in, len(err.Error()))
			}
		})
	}
}

func TestKeySpacesDiffer(t *testing.T) {
	t.Parallel()
	pair, big := advisory.PairKey(1, 2), advisory.Int64Key(1<<32|2)
	if pair == big {
		t.Fatal("PairKey(1, 2) == Int64Key(1<<32|2); the two key spaces must differ")
	}
	if pair.Compare(big) == 0 {
		t.Fatal("Compare treats the two key spaces as equal")
	}
	if !pair.IsPair() || big.IsPair() {
		t.Fatal("IsPair is wrong")
	}
	if _, ok := pair.Int64(); ok {
		t.Fatal("Int64() ok on a pair key")
	}
	if _, _, ok := big.Pair(); ok {
		t.Fatal("Pair() ok on a bigint key")
	}
	if v, ok := big.Int64(); !ok || v != 1<<32|2 {
		t.Fatalf("Int64() = %d, %v", v, ok)
	}
	if a, b, ok := pair.Pair(); !ok || a != 1 || b != 2 {
		t.Fatalf("Pair() = %d, %d, %v", a, b, ok)
	}
}

func TestKeyCompareIsATotalOrder(t *testing.T) {
	t.Parallel()
	keys := []advisory.Key{
		advisory.PairKey(math.MaxInt32, math.MaxInt32),
		advisory.Int64Key(math.MaxInt64),
		advisory.PairKey(0, -1),
		advisory.Int64Key(-1),
		advisory.PairKey(-1, 5),
		advisory.Int64Key(math.MinInt64),
		advisory.Int64Key(1 << 32),
		advisory.Int64Key(0xffffffff),
		advisory.PairKey(0, 1),
		advisory.Int64Key(0),
	}
	want := []string{
		"-9223372036854775808", "-1", "0", "4294967295", "4294967296", "9223372036854775807",
		"-1:5", "0:-1", "0:1", "2147483647:2147483647",
	}
	sorted := slices.Clone(keys)
	slices.SortFunc(sorted, advisory.Key.Compare)
	got := make([]string, len(sorted))
	for i, k := range sorted {
		got[i] = k.String()
	}
	if !slices.Equal(got, want) {
		t.Fatalf("sorted = %v, want %v", got, want)
	}
	for _, a := range keys {
		for _, b := range keys {
			if a.Compare(b) != -b.Compare(a) {
				t.Fatalf("Compare(%v, %v) is not antisymmetric", a, b)
			}
			if (a.Compare(b) == 0) != (a == b) {
				t.Fatalf("Compare(%v, %v) = 0 disagrees with ==", a, b)
			}
		}
	}
}

func TestNameKey(t *testing.T) {
	t.Parallel()
	k := advisory.NameKey(100, "sync_inventory")
	if want := advisory.PairKey(100, advisory.HashText("sync_inventory")); k != want {
		t.Fatalf("NameKey = %v, want %v", k, want)
	}
}

// FuzzParseKey checks that ParseKey never panics, that its errors match
// ErrBadKey, that every key it reads reads back from its String, and that
// a number it reads is written back as it was read.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{
		"42", "-1", "1:2", "-2147483648:2147483647", "", ":", "1:2:3", "9223372036854775808",
		"7:nightly", `7:"1234"`, `7:""`, "7: x", "1::2", `7:"\x00"`, "a:b", "007",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := advisory.ParseKey(s)
		if err != nil {
			if !errors.Is(err, advisory.ErrBadKey) {
				t.Fatalf("ParseKey(%q) error %v does not match ErrBadKey", s, err)
			}
			return
		}
		back, err := advisory.ParseKey(k.String())
		if err != nil || back != k {
			t.Fatalf("round trip of %q: %v -> %q -> %v, %v", s, k, k.String(), back, err)
		}
		_, after, pair := strings.Cut(s, ":")
		if !pair || after != "" && (after[0] == '-' || after[0] >= '0' && after[0] <= '9') {
			if k.String() != s {
				t.Fatalf("ParseKey(%q).String() = %q; want a number read back as written", s, k.String())
			}
		}
	})
}

// FuzzParseKeyName checks that every name without a NUL byte can be
// written quoted, and reads back as its NameKey.
func FuzzParseKeyName(f *testing.F) {
	for _, s := range []string{"nightly", "", "1234", "-1", ":", " x ", `"`, "a:b", "\xff", "é"} {
		f.Add(int32(7), s)
	}
	f.Fuzz(func(t *testing.T, ns int32, name string) {
		s := fmt.Sprintf("%d:%s", ns, strconv.Quote(name))
		k, err := advisory.ParseKey(s)
		if strings.IndexByte(name, 0) >= 0 {
			if !errors.Is(err, advisory.ErrBadKey) {
				t.Fatalf("ParseKey(%q) = %v, %v; want ErrBadKey for a NUL byte", s, k, err)
			}
			return
		}
		if want := advisory.NameKey(ns, name); err != nil || k != want {
			t.Fatalf("ParseKey(%q) = %v, %v; want %v", s, k, err, want)
		}
	})
}
