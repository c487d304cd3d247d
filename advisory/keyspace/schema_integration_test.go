package keyspace_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/keyspace"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// TestSyncDefaultTableIntegration: services whose search_path differ (an
// empty one and a tenant's) sync to one table, pgadvisory.namespaces,
// which the first creates with its schema; and Sync does not create it
// beside pgadvisory_namespaces, an earlier release's table, but says how
// to move that in, after which Sync finds its rows.
func TestSyncDefaultTableIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx := context.Background()
		db := pgtest.NewDatabase(t, tg, "sync-default")
		pgtest.Exec(t, db.DB, "CREATE SCHEMA tenant")
		var a, b keyspace.Registry
		a.MustRegister(advisory.Namespace{ID: 501, Name: "svc-a"})
		b.MustRegister(advisory.Namespace{ID: 502, Name: "svc-b"})
		if err := a.Sync(ctx, pgtest.OpenSetting(t, db, "search_path", `""`)); err != nil {
			t.Fatal(err)
		}
		if err := b.Sync(ctx, pgtest.OpenSetting(t, db, "search_path", "tenant")); err != nil {
			t.Fatal(err)
		}
		got, _ := syncReadTable(t, db.DB, keyspace.DefaultTable)
		if len(got) != 3 || got[1].ID != 501 || got[2].ID != 502 {
			t.Errorf("%s holds %v; want the library's row, 501 and 502", keyspace.DefaultTable, got)
		}
		var tables []string
		rows, err := db.DB.QueryContext(ctx, "SELECT schemaname || '.' || tablename FROM pg_catalog.pg_tables "+
			"WHERE schemaname NOT IN ('pg_catalog', 'information_schema')")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			tables = append(tables, s)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		if len(tables) != 1 || tables[0] != keyspace.DefaultTable {
			t.Errorf("tables %v; want only %s", tables, keyspace.DefaultTable)
		}

		old := pgtest.NewDatabase(t, tg, "sync-legacy")
		pgtest.Exec(t, old.DB, `CREATE TABLE public.pgadvisory_namespaces (id integer PRIMARY KEY, name text NOT NULL UNIQUE, `+
			`owner text NOT NULL DEFAULT '', doc text NOT NULL DEFAULT '', registered_by text NOT NULL DEFAULT '', `+
			`updated_at timestamptz NOT NULL DEFAULT now())`)
		pgtest.Exec(t, old.DB, `INSERT INTO public.pgadvisory_namespaces (id, name, registered_by) VALUES (501, 'svc-x', 'x')`)
		err = a.Sync(ctx, old.DB)
		move := "CREATE SCHEMA IF NOT EXISTS pgadvisory; ALTER TABLE public.pgadvisory_namespaces SET SCHEMA pgadvisory; " +
			"ALTER TABLE pgadvisory.pgadvisory_namespaces RENAME TO namespaces"
		if err == nil || !strings.Contains(err.Error(), move) {
			t.Fatalf("Sync beside an earlier release's table = %v; want it to say: %s", err, move)
		}
		pgtest.Exec(t, old.DB, move)
		if err := a.Sync(ctx, old.DB); !errors.Is(err, keyspace.ErrConflict) {
			t.Errorf("Sync after the move = %v; want the conflict with the moved row 501 svc-x", err)
		}
	})
}
