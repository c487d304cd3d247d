package advisory_test

import (
	"context"
	"math"
	mrand "math/rand/v2"
	"strings"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// Integration tests that the client-side hashes equal the server's.

// TestHashTextIntegration runs the integration tests of HashText and
// HashTextExtended, one subtest a theme, each on every server and driver.
func TestHashTextIntegration(t *testing.T) {
	t.Run("RandomStrings", testHashTextRandomStrings)
	t.Run("KnownValues", testHashTextKnownValues)
}

// pgHashStrings is how many random strings each server and driver checks.
const pgHashStrings = 10_000

// pgHashSeed seeds the random strings, so that every run checks the same
// ones.
const pgHashSeed = 0x5eed_a11_c0de

// pgHashBatch is how many strings go to the server in one query.
const pgHashBatch = 500

// pgRandomText returns a random string the server can store as text: valid
// UTF-8 without NUL. It mixes short ASCII, multi-byte text, and long
// strings of up to a few KB.
func pgRandomText(rnd *mrand.Rand) string {
	var n int
	switch k := rnd.IntN(10); {
	case k < 4:
		n = rnd.IntN(16)
	case k < 8:
		n = rnd.IntN(64)
	case k < 9:
		n = rnd.IntN(512)
	default:
		n = rnd.IntN(4096)
	}
	asciiOnly := rnd.IntN(3) == 0
	var b strings.Builder
	for b.Len() < n {
		var r rune
		switch k := rnd.IntN(10); {
		case asciiOnly || k < 5:
			r = rune(1 + rnd.IntN(0x7f)) // no NUL
		case k < 7:
			r = rune(0x80 + rnd.IntN(0x800-0x80)) // two bytes: é, ß, Cyrillic
		case k < 9:
			r = rune(0x800 + rnd.IntN(0xd800-0x800)) // three bytes: CJK
		default:
			r = rune(0x10000 + rnd.IntN(0x10ffff-0x10000)) // four bytes: emoji
		}
		b.WriteRune(r)
	}
	return b.String()
}

// pgTextArray renders ss as a PostgreSQL text[] literal, every element
// quoted with backslash escapes, so that any string round-trips. It goes to
// the server as a text parameter and is cast there.
func pgTextArray(ss []string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, s := range ss {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		for _, c := range []byte(s) {
			if c == '"' || c == '\\' {
				b.WriteByte('\\')
			}
			b.WriteByte(c)
		}
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

func testHashTextRandomStrings(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		rnd := mrand.New(mrand.NewPCG(pgHashSeed, 1))
		hashSeeds := []int64{0, 1, -1, math.MinInt64, rnd.Int64()}
		t.Logf("strings from seed %d; hash seeds %v", pgHashSeed, hashSeeds)

		strs := make([]string, 0, pgHashStrings+64)
		// Every length from 0 to 40 covers every tail after 0 to 3
		// blocks of 12 bytes; then the known cases.
		for n := range 41 {
			strs = append(strs, strings.Repeat("x", n))
		}
		strs = append(strs, "", "a", "abc", "héllo", "日本語", "🙂", `"\{},`, strings.Repeat("é", 2000))
		for len(strs) < cap(strs) {
			strs = append(strs, pgRandomText(rnd))
		}

		const query = `SELECT hashtext(s), hashtextextended(s, $2), hashtextextended(s, $3),
			hashtextextended(s, $4), hashtextextended(s, $5), hashtextextended(s, $6), octet_length(s)
			FROM unnest(($1::text)::text[]) WITH ORDINALITY AS u(s, i) ORDER BY i`
		mismatches := 0
		for start := 0; start < len(strs); start += pgHashBatch {
			batch := strs[start:min(start+pgHashBatch, len(strs))]
			rows, err := tg.DB.QueryContext(ctx, query, pgTextArray(batch), hashSeeds[0], hashSeeds[1], hashSeeds[2], hashSeeds[3], hashSeeds[4])
			if err != nil {
				t.Fatal(err)
			}
			i := 0
			for ; rows.Next(); i++ {
				var text int32
				var ext [5]int64
				var octets int
				if err := rows.Scan(&text, &ext[0], &ext[1], &ext[2], &ext[3], &ext[4], &octets); err != nil {
					t.Fatal(err)
				}
				s := batch[i]
				if octets != len(s) {
					t.Fatalf("string #%d reached the server as %d bytes, not %d: the literal is wrong", start+i, octets, len(s))
				}
				if got := advisory.HashText(s); got != text {
					mismatches++
					t.Errorf("HashText(%.60q) = %d; server hashtext = %d", s, got, text)
				}
				for j, hs := range hashSeeds {
					if got := advisory.HashTextExtended(s, hs); got != ext[j] {
						mismatches++
						t.Errorf("HashTextExtended(%.60q, %d) = %d; server = %d", s, hs, got, ext[j])
					}
				}
				if mismatches > 20 {
					t.Fatal("too many mismatches")
				}
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			rows.Close()
			if i != len(batch) {
				t.Fatalf("server hashed %d strings of %d", i, len(batch))
			}
		}
	})
}

func testHashTextKnownValues(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		tests := []struct {
			s    string
			seed int64
			ext  bool
			want int64
		}{
			{"", 0, false, -1477818771},
			{"a", 0, false, 1075015857},
			{"abc", 0, false, -785388649},
			{"héllo", 0, false, -1340490493},
			{"abc", 0, true, -6747756470228489321},
		}
		for _, tt := range tests {
			var got, server int64
			q := "SELECT hashtext($1)::bigint"
			args := []any{tt.s}
			if tt.ext {
				got = advisory.HashTextExtended(tt.s, tt.seed)
				q = "SELECT hashtextextended($1, $2)"
				args = append(args, tt.seed)
			} else {
				got = int64(advisory.HashText(tt.s))
			}
			if err := tg.DB.QueryRowContext(context.Background(), q, args...).Scan(&server); err != nil {
				t.Fatal(err)
			}
			if got != tt.want || server != tt.want {
				t.Errorf("%s of %q: client %d, server %d; want %d", q, tt.s, got, server, tt.want)
			}
		}
	})
}
