package idempotency_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory/idempotency"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// TestRunDefaultTableIntegration: callers whose search_path differ (an
// empty one and a tenant's) record their operations in one table,
// pgadvisory.idempotency, which the first run creates with its schema; and
// Run does not create it beside pgadvisory_idempotency, an earlier
// release's table, whose records it would ignore, but says how to move
// that in, after which Run finds its records.
func TestRunDefaultTableIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		value := func(v string) idempotency.Func {
			return func(context.Context, *sql.Tx) ([]byte, error) { return []byte(v), nil }
		}
		db := pgtest.NewDatabase(t, tg, "idempotency-default")
		pgtest.Exec(t, db.DB, "CREATE SCHEMA tenant")
		res, err := idempotency.Run(ctx, pgtest.OpenSetting(t, db, "search_path", `""`), "op-1", value("first"))
		if err != nil || res.Outcome != idempotency.Ran {
			t.Fatalf("first Run = %+v, %v; want Ran", res, err)
		}
		res, err = idempotency.Run(ctx, pgtest.OpenSetting(t, db, "search_path", "tenant"), "op-1", value("second"))
		if err != nil || res.Outcome != idempotency.Done || string(res.Value) != "first" {
			t.Fatalf("Run with another search_path = %+v, %v; want Done with the first value", res, err)
		}
		var n int
		if err := db.DB.QueryRowContext(ctx, "SELECT count(*) FROM pg_catalog.pg_tables "+
			"WHERE schemaname NOT IN ('pg_catalog', 'information_schema')").Scan(&n); err != nil || n != 1 {
			t.Errorf("%d tables, %v; want only %s", n, err, idempotency.DefaultTable)
		}

		old := pgtest.NewDatabase(t, tg, "idempotency-legacy")
		pgtest.Exec(t, old.DB, "CREATE TABLE public.pgadvisory_idempotency (key text PRIMARY KEY, result bytea, "+
			"created_at timestamptz NOT NULL DEFAULT now())")
		pgtest.Exec(t, old.DB, "INSERT INTO public.pgadvisory_idempotency (key, result) VALUES ('op-1', 'recorded')")
		_, err = idempotency.Run(ctx, old.DB, "op-1", value("again"))
		move := "CREATE SCHEMA IF NOT EXISTS pgadvisory; ALTER TABLE public.pgadvisory_idempotency SET SCHEMA pgadvisory; " +
			"ALTER TABLE pgadvisory.pgadvisory_idempotency RENAME TO idempotency"
		if err == nil || !strings.Contains(err.Error(), move) {
			t.Fatalf("Run beside an earlier release's table = %v; want it to say: %s", err, move)
		}
		pgtest.Exec(t, old.DB, move)
		res, err = idempotency.Run(ctx, old.DB, "op-1", value("again"))
		if err != nil || res.Outcome != idempotency.Done || string(res.Value) != "recorded" {
			t.Errorf("Run after the move = %+v, %v; want Done with the recorded value", res, err)
		}
	})
}
