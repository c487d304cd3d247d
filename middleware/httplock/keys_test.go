package httplock_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/httplock"
)

// withPath returns a request whose path parameters are kv, pairwise.
func withPath(kv ...string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	for i := 0; i+1 < len(kv); i += 2 {
		r.SetPathValue(kv[i], kv[i+1])
	}
	return r
}

// header returns a func that reads the request header name, standing for
// a router's own store of route variables.
func header(name string) func(*http.Request) string {
	return func(r *http.Request) string { return r.Header.Get(name) }
}

// withHeader returns a request whose headers are kv, pairwise.
func withHeader(kv ...string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	for i := 0; i+1 < len(kv); i += 2 {
		r.Header.Set(kv[i], kv[i+1])
	}
	return r
}

func TestKeyFuncs(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("9", 1<<20)
	tests := []struct {
		name    string
		key     httplock.KeyFunc
		req     *http.Request
		want    advisory.Key
		wantErr bool
	}{
		{"PathKey", httplock.PathKey(7, "id"), withPath("id", "42"), advisory.PairKey(7, 42), false},
		{"PathKeyNegative", httplock.PathKey(7, "id"), withPath("id", "-2147483648"), advisory.PairKey(7, -2147483648), false},
		{"PathKeyMax", httplock.PathKey(7, "id"), withPath("id", "2147483647"), advisory.PairKey(7, 2147483647), false},
		{"PathKeyLeadingZeros", httplock.PathKey(7, "id"), withPath("id", "0042"), advisory.Key{}, true},
		{"PathKeyThousandZeros", httplock.PathKey(7, "id"), withPath("id", strings.Repeat("0", 1000)+"42"), advisory.Key{}, true},
		{"PathKeyPlus", httplock.PathKey(7, "id"), withPath("id", "+1"), advisory.Key{}, true},
		{"PathKeyMinusZero", httplock.PathKey(7, "id"), withPath("id", "-0"), advisory.Key{}, true},
		{"PathKeyZero", httplock.PathKey(7, "id"), withPath("id", "0"), advisory.Key{}, true},
		{"PathKeyAboveInt32", httplock.PathKey(7, "id"), withPath("id", "2147483648"), advisory.Key{}, true},
		{"PathKeyBelowInt32", httplock.PathKey(7, "id"), withPath("id", "-2147483649"), advisory.Key{}, true},
		{"PathKeyMissing", httplock.PathKey(7, "id"), withPath(), advisory.Key{}, true},
		{"PathKeyOtherParam", httplock.PathKey(7, "id"), withPath("order", "42"), advisory.Key{}, true},
		{"PathKeyGarbage", httplock.PathKey(7, "id"), withPath("id", "42abc"), advisory.Key{}, true},
		{"PathKeySpace", httplock.PathKey(7, "id"), withPath("id", " 42"), advisory.Key{}, true},
		{"PathKeyHex", httplock.PathKey(7, "id"), withPath("id", "0x2a"), advisory.Key{}, true},
		{"PathKeyNonUTF8", httplock.PathKey(7, "id"), withPath("id", "4\xff2"), advisory.Key{}, true},
		{"PathKeyHuge", httplock.PathKey(7, "id"), withPath("id", huge), advisory.Key{}, true},
		{"PathInt64Key", httplock.PathInt64Key("id"), withPath("id", "9223372036854775807"), advisory.Int64Key(9223372036854775807), false},
		{"PathInt64KeyOutOfRange", httplock.PathInt64Key("id"), withPath("id", "9223372036854775808"), advisory.Key{}, true},
		{"PathInt64KeyMissing", httplock.PathInt64Key("id"), withPath(), advisory.Key{}, true},
		{"PathInt64KeyGarbage", httplock.PathInt64Key("id"), withPath("id", "1e3"), advisory.Key{}, true},
		{"PathInt64KeyLeadingZero", httplock.PathInt64Key("id"), withPath("id", "07"), advisory.Key{}, true},
		{"PathInt64KeyPlus", httplock.PathInt64Key("id"), withPath("id", "+7"), advisory.Key{}, true},
		{"PathInt64KeyMinusZero", httplock.PathInt64Key("id"), withPath("id", "-0"), advisory.Key{}, true},
		{"PathInt64KeyZero", httplock.PathInt64Key("id"), withPath("id", "0"), advisory.Key{}, true},
		{"PathNameKey", httplock.PathNameKey(9, "tenant"), withPath("tenant", "acme"), advisory.NameKey(9, "acme"), false},
		{"PathNameKeyNonUTF8", httplock.PathNameKey(9, "tenant"), withPath("tenant", "\xff\xfe"), advisory.NameKey(9, "\xff\xfe"), false},
		{"PathNameKeyHuge", httplock.PathNameKey(9, "tenant"), withPath("tenant", huge), advisory.NameKey(9, huge), false},
		{"PathNameKeyTwo", httplock.PathNameKey(9, "tenant", "slug"), withPath("tenant", "a/b", "slug", "c"),
			advisory.NameKey(9, "3:a/b1:c"), false},
		{"PathNameKeyEmpty", httplock.PathNameKey(9, "tenant"), withPath("tenant", ""), advisory.Key{}, true},
		{"PathNameKeySecondMissing", httplock.PathNameKey(9, "tenant", "slug"), withPath("tenant", "acme"), advisory.Key{}, true},
		{"ValueKey", httplock.ValueKey(7, header("X-Id")), withHeader("X-Id", "42"), advisory.PairKey(7, 42), false},
		{"ValueKeyAboveInt32", httplock.ValueKey(7, header("X-Id")), withHeader("X-Id", "2147483648"), advisory.Key{}, true},
		{"ValueKeyMissing", httplock.ValueKey(7, header("X-Id")), withHeader(), advisory.Key{}, true},
		{"ValueKeyGarbage", httplock.ValueKey(7, header("X-Id")), withHeader("X-Id", "4 2"), advisory.Key{}, true},
		{"ValueKeyPlus", httplock.ValueKey(7, header("X-Id")), withHeader("X-Id", "+42"), advisory.Key{}, true},
		{"ValueKeyLeadingZero", httplock.ValueKey(7, header("X-Id")), withHeader("X-Id", "042"), advisory.Key{}, true},
		{"ValueInt64Key", httplock.ValueInt64Key(header("X-Id")), withHeader("X-Id", "-9223372036854775808"),
			advisory.Int64Key(-9223372036854775808), false},
		{"ValueInt64KeyOutOfRange", httplock.ValueInt64Key(header("X-Id")), withHeader("X-Id", "-9223372036854775809"), advisory.Key{}, true},
		{"ValueNameKey", httplock.ValueNameKey(9, header("X-Tenant")), withHeader("X-Tenant", "acme"), advisory.NameKey(9, "acme"), false},
		{"ValueNameKeyTwo", httplock.ValueNameKey(9, header("X-Tenant"), header("X-Doc")), withHeader("X-Tenant", "a", "X-Doc", "b/c"),
			advisory.NameKey(9, "1:a3:b/c"), false},
		{"ValueNameKeyEmpty", httplock.ValueNameKey(9, header("X-Tenant")), withHeader(), advisory.Key{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.key(tt.req)
			if tt.wantErr {
				if !errors.Is(err, httplock.ErrBadKey) {
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

// TestPathAndValueKeysAgree checks that the path key functions and the
// value key functions, given the same value, give the same key or fail
// alike: they share their parsing.
func TestPathAndValueKeysAgree(t *testing.T) {
	t.Parallel()
	get := func(r *http.Request) string { return r.PathValue("v") }
	pairs := []struct {
		name        string
		path, value httplock.KeyFunc
	}{
		{"ID", httplock.PathKey(3, "v"), httplock.ValueKey(3, get)},
		{"Int64", httplock.PathInt64Key("v"), httplock.ValueInt64Key(get)},
		{"Name", httplock.PathNameKey(3, "v"), httplock.ValueNameKey(3, get)},
	}
	for _, p := range pairs {
		for _, v := range []string{"42", "-1", "", "0", "-0", "+1", "007", "x", "2147483648", "9223372036854775808", "\xff"} {
			r := withPath("v", v)
			k1, err1 := p.path(r)
			k2, err2 := p.value(r)
			if k1 != k2 || (err1 == nil) != (err2 == nil) {
				t.Errorf("%s(%q): path gives %v, %v; value gives %v, %v", p.name, v, k1, err1, k2, err2)
			}
		}
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
		if got := httplock.JoinName(tt.values...); got != tt.want {
			t.Errorf("JoinName(%q) = %q, want %q", tt.values, got, tt.want)
		}
	}
}

// TestJoinNameSameLength checks what the JoinName documentation promises:
// lists of the same length join alike only if they are equal, while lists
// of different lengths can join alike.
func TestJoinNameSameLength(t *testing.T) {
	t.Parallel()
	// Lists built to confuse a careless encoding: separators, digits and
	// colons inside the values, empty values, values that look like
	// encoded ones.
	lists := [][]string{
		{"a/b", "c"}, {"a", "b/c"}, {"1:a", "b"}, {"1", "a1:b"}, {"12:", "x"}, {"1", "2:x"},
		{"", ""}, {"", "0:"}, {"0:", ""}, {"a", "b"}, {"b", "a"},
		{"a", "b", "c"}, {"a", "b:", "c"}, {"1:a", "", ""}, {"", "1:a", ""}, {"", "", "1:a"},
		{"ab", "", "c"}, {"a", "b", ""}, {"1:a1:b", "", ""}, {"", "", ""},
	}
	for i, a := range lists {
		for _, b := range lists[i+1:] {
			if len(a) == len(b) && httplock.JoinName(a...) == httplock.JoinName(b...) {
				t.Errorf("JoinName(%q) = JoinName(%q) = %q", a, b, httplock.JoinName(a...))
			}
		}
	}
	// Across lengths, the documented collision exists: a single value is
	// used as it is.
	if httplock.JoinName("1:a1:b") != httplock.JoinName("a", "b") {
		t.Error(`JoinName("1:a1:b") and JoinName("a", "b") differ; update the JoinName documentation`)
	}
}

// TestKeyFuncPanics checks the build-time checks of the key functions.
func TestKeyFuncPanics(t *testing.T) {
	t.Parallel()
	for name, build := range map[string]func(){
		"PathKeyEmpty":       func() { httplock.PathKey(1, "") },
		"PathInt64KeyEmpty":  func() { httplock.PathInt64Key("") },
		"PathNameKeyNone":    func() { httplock.PathNameKey(1) },
		"PathNameKeyEmpty":   func() { httplock.PathNameKey(1, "a", "") },
		"ValueKeyNil":        func() { httplock.ValueKey(1, nil) },
		"ValueInt64KeyNil":   func() { httplock.ValueInt64Key(nil) },
		"ValueNameKeyNone":   func() { httplock.ValueNameKey(1) },
		"ValueNameKeyOneNil": func() { httplock.ValueNameKey(1, header("X"), nil) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			mustPanic(t, build)
		})
	}
}
