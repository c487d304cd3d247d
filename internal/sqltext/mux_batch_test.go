package sqltext_test

import (
	"slices"
	"testing"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

func TestCarrierUnlockBatch(t *testing.T) {
	t.Parallel()
	keys := []sqltext.Key{{Bigint: 42}, {Pair: true, A: -1, B: 2}}
	shared := []bool{false, true}
	ours := "pg_catalog.pg_backend_pid() = 7 AND pg_catalog.current_setting('pgadvisory.lease', true) = '9'"
	body := "SELECT u.i, CASE WHEN " + ours + " THEN CASE WHEN CASE WHEN x.p[u.i] THEN " +
		"CASE WHEN x.s[u.i] THEN pg_catalog.pg_advisory_unlock_shared(x.a[u.i], x.b[u.i]) ELSE pg_catalog.pg_advisory_unlock(x.a[u.i], x.b[u.i]) END ELSE " +
		"CASE WHEN x.s[u.i] THEN pg_catalog.pg_advisory_unlock_shared(u.k) ELSE pg_catalog.pg_advisory_unlock(u.k) END END " +
		"THEN 1 ELSE 0 END WHEN pg_catalog.pg_backend_pid() <> 7 THEN 2 ELSE 0 END FROM (SELECT "
	arrays := []string{"{42,0}", "{0,-1}", "{0,2}", "{false,true}", "{false,true}"}
	tests := []struct {
		name string
		form sqltext.Form
		want string
		args []any
	}{
		{"inline", sqltext.Inline, body + "'{0,-1}'::pg_catalog.int4[] AS a, '{0,2}'::pg_catalog.int4[] AS b, " +
			"'{false,true}'::pg_catalog.bool[] AS p, '{false,true}'::pg_catalog.bool[] AS s) AS x, " +
			"pg_catalog.unnest('{42,0}'::pg_catalog.int8[]) WITH ORDINALITY AS u(k, i)", nil},
		{"params", sqltext.Params, body + "$2::pg_catalog.text::pg_catalog.int4[] AS a, $3::pg_catalog.text::pg_catalog.int4[] AS b, " +
			"$4::pg_catalog.text::pg_catalog.bool[] AS p, $5::pg_catalog.text::pg_catalog.bool[] AS s) AS x, " +
			"pg_catalog.unnest($1::pg_catalog.text::pg_catalog.int8[]) WITH ORDINALITY AS u(k, i)", []any{arrays[0], arrays[1], arrays[2], arrays[3], arrays[4]}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := sqltext.CarrierUnlockBatch(tt.form, 7, 9, keys, shared)
			if s.Query != tt.want {
				t.Errorf("\n got %s\nwant %s", s.Query, tt.want)
			}
			if !slices.Equal(s.Args, tt.args) {
				t.Errorf("args %#v; want %#v", s.Args, tt.args)
			}
		})
	}
	// The Params text is the same for every batch on a carrier.
	a := sqltext.CarrierUnlockBatch(sqltext.Params, 7, 9, keys, shared).Query
	b := sqltext.CarrierUnlockBatch(sqltext.Params, 7, 9, keys[:1], nil).Query
	if a != b {
		t.Errorf("Params text depends on the keys:\n%s\n%s", a, b)
	}
}
