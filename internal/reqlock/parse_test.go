package reqlock_test

import (
	"strings"
	"testing"

	"github.com/pgadvisory/pgadvisory/internal/reqlock"
)

func TestParseInt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		v       string
		bits    int
		want    int64
		wantErr string // a part of the message; "" for no error
	}{
		{"42", 32, 42, ""},
		{"+7", 32, 7, ""},
		{"-2147483648", 32, -2147483648, ""},
		{"2147483648", 32, 0, `id = "2147483648": out of range [-2147483648, 2147483647]`},
		{"9223372036854775807", 64, 9223372036854775807, ""},
		{"9223372036854775808", 64, 0, "out of range [-9223372036854775808, 9223372036854775807]"},
		{"", 32, 0, "id: missing"},
		{"0x2a", 32, 0, "not a decimal integer"},
		{"1_000", 64, 0, "not a decimal integer"},
		{" 1", 32, 0, "not a decimal integer"},
		{strings.Repeat("9", 1000), 32, 0, `"` + strings.Repeat("9", reqlock.MaxQuoted) + `..."`},
		{"\xff\x00", 32, 0, `"\xff\x00"`},
	}
	for _, tt := range tests {
		got, err := reqlock.ParseInt("id", tt.v, tt.bits)
		switch {
		case tt.wantErr == "" && (err != nil || got != tt.want):
			t.Errorf("ParseInt(%q, %d) = %d, %v; want %d", tt.v, tt.bits, got, err, tt.want)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("ParseInt(%q, %d) = %d, %v; want an error with %q", tt.v, tt.bits, got, err, tt.wantErr)
		case err != nil && len(err.Error()) > 120:
			t.Errorf("ParseInt(%q...): error of %d bytes", tt.v[:10], len(err.Error()))
		}
	}
}
