package reqlock_test

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/pgadvisory/pgadvisory/middleware/internal/reqlock"
)

func TestParseID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		v       string
		bits    int
		want    int64
		wantErr string // a part of the message; "" for no error
	}{
		{"42", 32, 42, ""},
		{"-7", 32, -7, ""},
		{"-2147483648", 32, -2147483648, ""},
		{"2147483647", 32, 2147483647, ""},
		{"2147483648", 32, 0, `id = "2147483648": out of range [-2147483648, 2147483647]`},
		{"9223372036854775807", 64, 9223372036854775807, ""},
		{"-9223372036854775808", 64, -9223372036854775808, ""},
		{"9223372036854775808", 64, 0, "out of range [-9223372036854775808, 9223372036854775807]"},
		{"", 32, 0, "id: missing"},
		{"0", 32, 0, "id: zero"},
		{"0", 64, 0, "id: zero"},
		{"-0", 32, 0, "not canonical"},
		{"+1", 32, 0, "not canonical"},
		{"+0", 64, 0, "not canonical"},
		{"007", 32, 0, "not canonical"},
		{"-007", 64, 0, "not canonical"},
		{"00", 32, 0, "not canonical"},
		{strings.Repeat("0", 1000) + "1", 32, 0, "not canonical"},
		{"+" + strings.Repeat("9", 30), 64, 0, "not canonical"},
		{"-", 32, 0, "not a decimal integer"},
		{"0x2a", 32, 0, "not a decimal integer"},
		{"1_000", 64, 0, "not a decimal integer"},
		{" 1", 32, 0, "not a decimal integer"},
		{"1 ", 32, 0, "not a decimal integer"},
		{"1e3", 32, 0, "not a decimal integer"},
		{"٣", 32, 0, "not a decimal integer"},
		{strings.Repeat("9", 1000), 32, 0, `"` + strings.Repeat("9", reqlock.MaxQuoted) + `..."`},
		{"\xff\x00", 32, 0, `"\xff\x00"`},
	}
	for _, tt := range tests {
		got, err := reqlock.ParseID("id", tt.v, tt.bits)
		switch {
		case tt.wantErr == "" && (err != nil || got != tt.want):
			t.Errorf("ParseID(%q, %d) = %d, %v; want %d", tt.v, tt.bits, got, err, tt.want)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("ParseID(%q, %d) = %d, %v; want an error with %q", tt.v, tt.bits, got, err, tt.wantErr)
		case err != nil && len(err.Error()) > 120:
			t.Errorf("ParseID(%q...): error of %d bytes", tt.v[:10], len(err.Error()))
		}
	}
}

// FuzzParseID checks that ParseID accepts exactly what strconv.FormatInt
// writes for a nonzero id in range.
func FuzzParseID(f *testing.F) {
	for _, s := range []string{"1", "-1", "0", "-0", "+1", "007", "2147483648", "9223372036854775808", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		for _, bits := range []int{32, 64} {
			id, err := reqlock.ParseID("id", v, bits)
			n, perr := strconv.ParseInt(v, 10, bits)
			want := perr == nil && n != 0 && strconv.FormatInt(n, 10) == v
			switch {
			case want && (err != nil || id != n):
				t.Errorf("ParseID(%q, %d) = %d, %v; want %d", v, bits, id, err, n)
			case !want && err == nil:
				t.Errorf("ParseID(%q, %d) = %d, nil; want an error", v, bits, id)
			}
		}
	})
}

func TestCheckUintID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		u       uint64
		bits    int
		want    int64
		wantErr string
	}{
		{1, 32, 1, ""},
		{math.MaxInt32, 32, math.MaxInt32, ""},
		{math.MaxInt32 + 1, 32, 0, "out of range [1, 2147483647]"},
		{math.MaxInt64, 64, math.MaxInt64, ""},
		{math.MaxInt64 + 1, 64, 0, "out of range [1, 9223372036854775807]"},
		{0, 64, 0, "zero"},
	}
	for _, tt := range tests {
		got, err := reqlock.CheckUintID("id", tt.u, tt.bits)
		switch {
		case tt.wantErr == "" && (err != nil || got != tt.want):
			t.Errorf("CheckUintID(%d, %d) = %d, %v; want %d", tt.u, tt.bits, got, err, tt.want)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("CheckUintID(%d, %d) = %d, %v; want an error with %q", tt.u, tt.bits, got, err, tt.wantErr)
		}
	}
}
