package middleware_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware"
)

// withPath returns a request whose path parameters are kv, pairwise.
func withPath(kv ...string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	for i := 0; i+1 < len(kv); i += 2 {
		r.SetPathValue(kv[i], kv[i+1])
	}
	return r
}

func TestPathKeys(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("9", 1<<20)
	tests := []struct {
		name    string
		key     middleware.KeyFunc
		req     *http.Request
		want    advisory.Key
		wantErr bool
	}{
		{"PathKey", middleware.PathKey(7, "id"), withPath("id", "42"), advisory.PairKey(7, 42), false},
		{"PathKeyNegative", middleware.PathKey(7, "id"), withPath("id", "-2147483648"), advisory.PairKey(7, -2147483648), false},
		{"PathKeyMax", middleware.PathKey(7, "id"), withPath("id", "2147483647"), advisory.PairKey(7, 2147483647), false},
		{"PathKeyLeadingZeros", middleware.PathKey(7, "id"), withPath("id", "0042"), advisory.PairKey(7, 42), false},
		{"PathKeyAboveInt32", middleware.PathKey(7, "id"), withPath("id", "2147483648"), advisory.Key{}, true},
		{"PathKeyBelowInt32", middleware.PathKey(7, "id"), withPath("id", "-2147483649"), advisory.Key{}, true},
		{"PathKeyMissing", middleware.PathKey(7, "id"), withPath(), advisory.Key{}, true},
		{"PathKeyOtherParam", middleware.PathKey(7, "id"), withPath("order", "42"), advisory.Key{}, true},
		{"PathKeyGarbage", middleware.PathKey(7, "id"), withPath("id", "42abc"), advisory.Key{}, true},
		{"PathKeySpace", middleware.PathKey(7, "id"), withPath("id", " 42"), advisory.Key{}, true},
		{"PathKeyHex", middleware.PathKey(7, "id"), withPath("id", "0x2a"), advisory.Key{}, true},
		{"PathKeyNonUTF8", middleware.PathKey(7, "id"), withPath("id", "4\xff2"), advisory.Key{}, true},
		{"PathKeyHuge", middleware.PathKey(7, "id"), withPath("id", huge), advisory.Key{}, true},
		{"PathInt64Key", middleware.PathInt64Key("id"), withPath("id", "9223372036854775807"), advisory.Int64Key(9223372036854775807), false},
		{"PathInt64KeyOutOfRange", middleware.PathInt64Key("id"), withPath("id", "9223372036854775808"), advisory.Key{}, true},
		{"PathInt64KeyMissing", middleware.PathInt64Key("id"), withPath(), advisory.Key{}, true},
		{"PathInt64KeyGarbage", middleware.PathInt64Key("id"), withPath("id", "1e3"), advisory.Key{}, true},
		{"PathNameKey", middleware.PathNameKey(9, "tenant"), withPath("tenant", "acme"), advisory.NameKey(9, "acme"), false},
		{"PathNameKeyNonUTF8", middleware.PathNameKey(9, "tenant"), withPath("tenant", "\xff\xfe"), advisory.NameKey(9, "\xff\xfe"), false},
		{"PathNameKeyHuge", middleware.PathNameKey(9, "tenant"), withPath("tenant", huge), advisory.NameKey(9, huge), false},
		{"PathNameKeyTwo", middleware.PathNameKey(9, "tenant", "slug"), withPath("tenant", "a/b", "slug", "c"),
			advisory.NameKey(9, "3:a/b1:c"), false},
		{"PathNameKeyEmpty", middleware.PathNameKey(9, "tenant"), withPath("tenant", ""), advisory.Key{}, true},
		{"PathNameKeySecondMissing", middleware.PathNameKey(9, "tenant", "slug"), withPath("tenant", "acme"), advisory.Key{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.key(tt.req)
			if tt.wantErr {
				if !errors.Is(err, middleware.ErrBadKey) {
					t.Fatalf("error %v, want one matching ErrBadKey", err)
				}
				if len(err.Error()) > 300 {
					t.Errorf("error message of %d bytes", len(err.Error()))
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestJoinName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		values []string
		want   string
	}{
		{[]string{"acme"}, "acme"},
		{[]string{""}, ""},
		{[]string{"a/b", "c"}, "3:a/b1:c"},
		{[]string{"a", "b/c"}, "1:a3:b/c"},
		{[]string{"1:a", "b"}, "3:1:a1:b"},
		{[]string{"é", "x"}, "2:é1:x"},
		{nil, ""},
	}
	for _, tt := range tests {
		if got := middleware.JoinName(tt.values...); got != tt.want {
			t.Errorf("JoinName(%q) = %q, want %q", tt.values, got, tt.want)
		}
	}
	if middleware.JoinName("a/b", "c") == middleware.JoinName("a", "b/c") {
		t.Error(`("a/b", "c") and ("a", "b/c") join alike`)
	}
}

// TestKeyFuncPanics checks the build-time checks of the key functions.
func TestKeyFuncPanics(t *testing.T) {
	t.Parallel()
	for name, build := range map[string]func(){
		"PathKeyEmpty":      func() { middleware.PathKey(1, "") },
		"PathInt64KeyEmpty": func() { middleware.PathInt64Key("") },
		"PathNameKeyNone":   func() { middleware.PathNameKey(1) },
		"PathNameKeyEmpty":  func() { middleware.PathNameKey(1, "a", "") },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			mustPanic(t, build)
		})
	}
}

// mustPanic checks that f panics with a message naming the package.
func mustPanic(t *testing.T, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		v := recover()
		s, ok := v.(string)
		if !ok || !strings.HasPrefix(s, "middleware: ") {
			t.Errorf("panic %v, want a message starting with %q", v, "middleware: ")
		}
	}()
	f()
}

func TestIDKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    advisory.Key
		wantErr bool
	}{
		{"42", advisory.PairKey(3, 42), false},
		{"-7", advisory.PairKey(3, -7), false},
		{"", advisory.Key{}, true},
		{"2147483648", advisory.Key{}, true},
		{"4 2", advisory.Key{}, true},
		{"\xff", advisory.Key{}, true},
	}
	for _, tt := range tests {
		got, err := middleware.IDKey(3, tt.in)
		if tt.wantErr != (err != nil) || got != tt.want {
			t.Errorf("IDKey(3, %q) = %v, %v", tt.in, got, err)
		}
		if err != nil && !errors.Is(err, middleware.ErrBadKey) {
			t.Errorf("IDKey(3, %q): error %v does not match ErrBadKey", tt.in, err)
		}
	}
}
