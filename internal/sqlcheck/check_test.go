package sqlcheck_test

import (
	"slices"
	"testing"

	"github.com/pgadvisory/pgadvisory/internal/sqlcheck"
)

func TestUnqualified(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		query string
		want  []string
	}{
		{"Function", "SELECT pg_try_advisory_lock(42)", []string{`function "pg_try_advisory_lock"`}},
		{"QualifiedFunction", "SELECT 1 WHERE pg_catalog.pg_try_advisory_lock(42)", nil},
		{"OwnSchema", "SELECT pgadvisory.f()", nil},
		{"OtherSchema", "SELECT shadow.pg_try_advisory_lock(42)", []string{`function "shadow.pg_try_advisory_lock"`}},
		{"QuotedFunction", `SELECT "pg_catalog"."now"(), "now"()`, []string{`function "now"`}},
		{"Relation", "SELECT 1 FROM pg_locks l JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid",
			[]string{`relation "pg_locks"`}},
		{"Join", "SELECT 1 FROM pg_catalog.pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid",
			[]string{`relation "pg_stat_activity"`}},
		{"FunctionInFrom", "SELECT 1 FROM generate_series(1, 2)", []string{`function "generate_series"`}},
		{"Syntax", "SELECT coalesce(NULLIF(a, b), 1), greatest(1, 2), CASE WHEN EXISTS (SELECT) THEN 1 END " +
			"FROM (VALUES (1),(2)) AS k(k) WHERE k IN (1, 2) AND NOT (k = 3) OR extract(epoch FROM pg_catalog.now()) > 0", nil},
		{"Lateral", "SELECT 1 FROM pg_catalog.pg_locks l CROSS JOIN LATERAL (SELECT 1) w", nil},
		{"Ordinality", "SELECT o FROM pg_catalog.unnest($1::pg_catalog.int8[]) WITH ORDINALITY AS s(k, o)", nil},
		{"Types", "SELECT $1::int8[], 1::bigint, 2::integer, 3::pg_catalog.oid, 4::oid", []string{`type "int8"`, `type "oid"`}},
		{"Strings", "SELECT 'pg_locks(1)', $$now()$$, $t$ FROM x $t$ -- now()\n /* FROM y */", nil},
		{"Regclass", "SELECT pg_catalog.nextval('seq'), pg_catalog.nextval('s.seq'), pg_catalog.to_regclass('t')",
			[]string{`relation "seq"`, `relation "t"`}},
		{"RegclassCast", `SELECT 'pg_catalog."a.b"'::pg_catalog.text::pg_catalog.regclass, 'c'::pg_catalog.regclass`,
			[]string{`relation "c"`}},
		{"CreateTable", `CREATE TABLE IF NOT EXISTS "t" (id integer PRIMARY KEY, at timestamptz DEFAULT now(), CHECK (id > 0))`,
			[]string{`relation "t"`, `function "now"`}},
		{"CreateTableQualified", `CREATE TABLE IF NOT EXISTS "pgadvisory"."t" (at pg_catalog.timestamptz DEFAULT pg_catalog.now())`, nil},
		{"CreateIndex", `CREATE INDEX IF NOT EXISTS "t_at" ON "t" (at)`, []string{`relation "t"`}},
		{"CreateIndexQualified", `CREATE INDEX IF NOT EXISTS "t_at" ON "s"."t" (at)`, nil},
		{"Sequence", "CREATE SCHEMA IF NOT EXISTS pgadvisory; CREATE SEQUENCE seq; CREATE SEQUENCE pgadvisory.seq",
			[]string{`relation "seq"`}},
		{"Insert", "INSERT INTO t (a) VALUES ($1) RETURNING a", []string{`relation "t"`}},
		{"UpdateDelete", "UPDATE t SET a = 1; DELETE FROM s.u WHERE a < pg_catalog.now()", []string{`relation "t"`}},
		{"Repeated", "SELECT now(), now()", []string{`function "now"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := sqlcheck.Unqualified(tt.query); !slices.Equal(got, tt.want) {
				t.Errorf("Unqualified(%q)\n got %q\nwant %q", tt.query, got, tt.want)
			}
		})
	}
}
