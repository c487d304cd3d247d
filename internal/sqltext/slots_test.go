package sqltext

import (
	"slices"
	"strings"
	"testing"
)

func TestSlotTry(t *testing.T) {
	pairs := []Key{{Pair: true, A: 7, B: 2}, {Pair: true, A: 7, B: -3}}
	bigints := []Key{{Bigint: 5}, {Bigint: -6}}
	const refusals = "SELECT CASE WHEN pg_catalog.pg_is_in_recovery() THEN -2 WHEN " + marked + " THEN -3 ELSE COALESCE("
	tests := []struct {
		name  string
		f     Form
		order []Key
		query string
		args  []any
	}{
		{"pairs inline", Inline, pairs,
			refusals + "(SELECT s.o FROM pg_catalog.unnest(ARRAY[2,-3]::pg_catalog.int4[]) WITH ORDINALITY AS s(k, o) WHERE pg_catalog.pg_try_advisory_lock(7, s.k) LIMIT 1), 0) END", nil},
		{"bigints inline", Inline, bigints,
			refusals + "(SELECT s.o FROM pg_catalog.unnest(ARRAY[5,-6]::pg_catalog.int8[]) WITH ORDINALITY AS s(k, o) WHERE pg_catalog.pg_try_advisory_lock(s.k) LIMIT 1), 0) END", nil},
		{"pairs params", Params, pairs,
			refusals + "(SELECT s.o FROM pg_catalog.unnest($1::pg_catalog.int4[]) WITH ORDINALITY AS s(k, o) WHERE pg_catalog.pg_try_advisory_lock($2::pg_catalog.int4, s.k) LIMIT 1), 0) END",
			[]any{[]int32{2, -3}, int32(7)}},
		{"bigints params", Params, bigints,
			refusals + "(SELECT s.o FROM pg_catalog.unnest($1::pg_catalog.int8[]) WITH ORDINALITY AS s(k, o) WHERE pg_catalog.pg_try_advisory_lock(s.k) LIMIT 1), 0) END",
			[]any{[]int64{5, -6}}},
	}
	for _, tt := range tests {
		got := SlotTry(tt.f, tt.order)
		if got.Query != tt.query {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got.Query, tt.query)
		}
		if !slices.EqualFunc(got.Args, tt.args, argEqual) || len(got.Args) != len(tt.args) {
			t.Errorf("%s: args %#v; want %#v", tt.name, got.Args, tt.args)
		}
	}
	// The Params text does not depend on the order, or on the slots.
	a := SlotTry(Params, []Key{{Bigint: 1}, {Bigint: 2}})
	b := SlotTry(Params, []Key{{Bigint: 9}, {Bigint: 8}, {Bigint: 7}})
	if a.Query != b.Query {
		t.Errorf("Params text depends on the slots:\n%s\n%s", a.Query, b.Query)
	}
}

func TestSlotWait(t *testing.T) {
	pairs := []Key{{Pair: true, A: 7, B: 2}, {Pair: true, A: 7, B: -3}}
	bigints := []Key{{Bigint: 5}, {Bigint: -6}}
	tests := []struct {
		name  string
		f     Form
		order []Key
		parts []string // in the order they must come
		args  []any
	}{
		{"pairs inline", Inline, pairs, []string{
			"WHEN pg_catalog.pg_is_in_recovery() THEN -2",
			"pg_catalog.pg_advisory_unlock_all()",
			"pg_catalog.pg_try_advisory_lock(7, s.k)",
			"LEAST(250, q.st - q.st / 10)",
			"pg_catalog.pg_advisory_xact_lock(7, v.k) FROM (VALUES ((ARRAY[2,-3]::pg_catalog.int4[])[1]))",
			"pg_catalog.pg_advisory_lock(7, v.k) FROM (VALUES ((ARRAY[2,-3]::pg_catalog.int4[])[1]))",
		}, nil},
		{"bigints inline", Inline, bigints, []string{
			"pg_catalog.pg_advisory_unlock_all()",
			"pg_catalog.pg_try_advisory_lock(s.k)",
			"ELSE 250 END",
			"pg_catalog.pg_advisory_xact_lock(v.k) FROM (VALUES ((ARRAY[5,-6]::pg_catalog.int8[])[1]))",
			"pg_catalog.pg_advisory_lock(v.k)",
		}, nil},
		{"pairs params", Params, pairs, []string{
			"pg_catalog.pg_try_advisory_lock($2::pg_catalog.int4, s.k)",
			"LEAST($3::pg_catalog.int8,",
			"pg_catalog.pg_advisory_xact_lock($2::pg_catalog.int4, v.k) FROM (VALUES (($1::pg_catalog.int4[])[1]))",
		}, []any{[]int32{2, -3}, int32(7), int64(250)}},
		{"bigints params", Params, bigints, []string{
			"pg_catalog.unnest($1::pg_catalog.int8[])",
			"LEAST($2::pg_catalog.int8,",
			"pg_catalog.pg_advisory_lock(v.k) FROM (VALUES (($1::pg_catalog.int8[])[1]))",
		}, []any{[]int64{5, -6}, int64(250)}},
	}
	for _, tt := range tests {
		got := SlotWait(tt.f, tt.order, 250)
		rest := got.Query
		for _, p := range tt.parts {
			i := strings.Index(rest, p)
			if i < 0 {
				t.Errorf("%s: %s\nlacks, or has out of order, %s", tt.name, got.Query, p)
				break
			}
			rest = rest[i+len(p):]
		}
		if !strings.HasPrefix(got.Query, "SELECT pg_catalog.set_config('lock_timeout', t.prev, true), t.o FROM (") {
			t.Errorf("%s: %s does not put lock_timeout back", tt.name, got.Query)
		}
		if !slices.EqualFunc(got.Args, tt.args, argEqual) || len(got.Args) != len(tt.args) {
			t.Errorf("%s: args %#v; want %#v", tt.name, got.Args, tt.args)
		}
	}
	a := SlotWait(Params, []Key{{Bigint: 1}, {Bigint: 2}}, 1000)
	b := SlotWait(Params, []Key{{Bigint: 9}, {Bigint: 8}, {Bigint: 7}}, 20)
	if a.Query != b.Query {
		t.Errorf("Params text depends on the slots or the bound:\n%s\n%s", a.Query, b.Query)
	}
}

// argEqual compares two arguments, slices by their elements.
func argEqual(a, b any) bool {
	switch a := a.(type) {
	case []int64:
		b, ok := b.([]int64)
		return ok && slices.Equal(a, b)
	case []int32:
		b, ok := b.([]int32)
		return ok && slices.Equal(a, b)
	}
	return a == b
}
