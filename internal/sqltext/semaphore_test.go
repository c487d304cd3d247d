package sqltext

import (
	"slices"
	"strings"
	"testing"
)

func TestSlotRing(t *testing.T) {
	tests := []struct {
		name  string
		f     Form
		base  Key
		n     int
		cond  string // the condition on a slot
		limit string // the slice of waiters
		args  []any
	}{
		{"pair inline", Inline, Key{Pair: true, A: -7, B: -2}, 4,
			"l.objsubid = 2 AND l.classid = 4294967289::pg_catalog.oid AND ((l.objid::pg_catalog.int8 - 4294967294) & 4294967295) < 4",
			"s.waiting[1:4 - s.held]", nil},
		{"bigint inline", Inline, Key{Bigint: -2}, 4,
			"l.objsubid = 1 AND ((l.classid::pg_catalog.int8 << 32) | l.objid::pg_catalog.int8) BETWEEN -2 AND 1",
			"s.waiting[1:4 - s.held]", nil},
		{"pair params", Params, Key{Pair: true, A: -7, B: -2}, 4,
			"l.objsubid = 2 AND l.classid = $1::pg_catalog.int8::pg_catalog.oid AND ((l.objid::pg_catalog.int8 - $2::pg_catalog.int8) & 4294967295) < $3::pg_catalog.int8",
			"s.waiting[1:$3::pg_catalog.int8 - s.held]", []any{int64(4294967289), int64(4294967294), int64(4)}},
		{"bigint params", Params, Key{Bigint: -2}, 4,
			"l.objsubid = 1 AND ((l.classid::pg_catalog.int8 << 32) | l.objid::pg_catalog.int8) BETWEEN $1::pg_catalog.int8 AND $2::pg_catalog.int8",
			"s.waiting[1:$3::pg_catalog.int8 - s.held]", []any{int64(-2), int64(1), int64(4)}},
	}
	for _, tt := range tests {
		got := SlotRing(tt.f, tt.base, tt.n)
		for _, want := range []string{tt.cond, tt.limit, "pg_catalog.pg_cancel_backend(p.pid)", "NOT k.granted"} {
			if !strings.Contains(got.Query, want) {
				t.Errorf("%s: %s\ndoes not contain %s", tt.name, got.Query, want)
			}
		}
		if !slices.Equal(got.Args, tt.args) {
			t.Errorf("%s: args %#v; want %#v", tt.name, got.Args, tt.args)
		}
	}
	// The Params text depends on the key space alone.
	for _, pair := range []bool{false, true} {
		a := SlotRing(Params, Key{Pair: pair, A: 1, B: 2, Bigint: 3}, 2)
		b := SlotRing(Params, Key{Pair: pair, A: -9, B: 8, Bigint: -7}, 300)
		if a.Query != b.Query {
			t.Errorf("Params text depends on the slots:\n%s\n%s", a.Query, b.Query)
		}
	}
}
