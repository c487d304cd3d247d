package advisory_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
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

func TestParseKeyRejects(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"", " 42", "42 ", "4x", "1:", ":1", "1:2:3", "1::2", "a:b",
		"9223372036854775808", "2147483648:0", "0:-2147483649", "0x10", "1,2",
		"+1", "007", "-0", "00", "-01", "1:+2", "01:2", "1:-0", "0:00", "1_000",
		strings.Repeat("0", 1000) + "1",
	} {
		t.Run(fmt.Sprintf("%.20q", s), func(t *testing.T) {
			t.Parallel()
			k, err := advisory.ParseKey(s)
			if !errors.Is(err, advisory.ErrBadKey) {
				t.Fatalf("ParseKey(%q) = %v, %v; want ErrBadKey", s, k, err)
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

func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"42", "-1", "1:2", "-2147483648:2147483647", "", ":", "1:2:3", "9223372036854775808"} {
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
	})
}

func TestNamespaceKeys(t *testing.T) {
	t.Parallel()
	billing := advisory.Namespace{ID: 7, Name: "billing", Owner: "team-payments", Doc: "invoice runs"}
	if got, want := billing.Key(3), advisory.PairKey(7, 3); got != want {
		t.Errorf("Key(3) = %v, want %v", got, want)
	}
	if got, want := billing.NameKey("nightly"), advisory.NameKey(7, "nightly"); got != want {
		t.Errorf("NameKey(nightly) = %v, want %v", got, want)
	}
}
