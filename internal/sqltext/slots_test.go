package sqltext

import (
	"slices"
	"testing"
)

func TestSlotTry(t *testing.T) {
	pairs := []Key{{Pair: true, A: 7, B: 2}, {Pair: true, A: 7, B: -3}}
	bigints := []Key{{Bigint: 5}, {Bigint: -6}}
	tests := []struct {
		name  string
		f     Form
		order []Key
		query string
		args  []any
	}{
		{"pairs inline", Inline, pairs,
			"SELECT o FROM pg_catalog.unnest(ARRAY[2,-3]::pg_catalog.int4[]) WITH ORDINALITY AS s(k, o) WHERE pg_catalog.pg_try_advisory_lock(7, k) LIMIT 1", nil},
		{"bigints inline", Inline, bigints,
			"SELECT o FROM pg_catalog.unnest(ARRAY[5,-6]::pg_catalog.int8[]) WITH ORDINALITY AS s(k, o) WHERE pg_catalog.pg_try_advisory_lock(k) LIMIT 1", nil},
		{"pairs params", Params, pairs,
			"SELECT o FROM pg_catalog.unnest($1::pg_catalog.int4[]) WITH ORDINALITY AS s(k, o) WHERE pg_catalog.pg_try_advisory_lock($2::pg_catalog.int4, k) LIMIT 1",
			[]any{[]int32{2, -3}, int32(7)}},
		{"bigints params", Params, bigints,
			"SELECT o FROM pg_catalog.unnest($1::pg_catalog.int8[]) WITH ORDINALITY AS s(k, o) WHERE pg_catalog.pg_try_advisory_lock(k) LIMIT 1",
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
