package migratelock_test

// migrate's own conformance tests for database drivers
// (database/testing), run on the Driver wrapped around migrate's
// postgres driver.

import (
	"testing"

	"github.com/golang-migrate/migrate/v4/database/postgres"
	dbtesting "github.com/golang-migrate/migrate/v4/database/testing"

	"github.com/pgadvisory/pgadvisory/integrations/migratelock"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// TestDriverConformanceIntegration runs database/testing.Test, which
// every migrate driver must pass: NilVersion, Lock and Unlock (a second
// Lock fails while the first holds), Run, SetVersion and Version, Drop.
func TestDriverConformanceIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		d := pgtest.NewDatabase(t, tg, "migratelock_conformance")
		db, err := d.Server.OpenDB(d.Driver)
		if err != nil {
			t.Fatal(err)
		}
		drv := wrap(t, db, migratelock.Config{})
		dbtesting.Test(t, drv, []byte("CREATE TABLE public.conformance (id int)"))
		if err := drv.Close(); err != nil {
			t.Fatal(err)
		}
		pgtest.AwaitFree(t, d.DB, key)
	})
}

// TestPostgresKeyIntegration checks that PostgresKey names the key
// migrate's postgres driver takes: while that driver holds its own lock,
// pg_locks shows PostgresKey's key granted, to the driver's session.
func TestPostgresKeyIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		d := pgtest.NewDatabase(t, tg, "migratelock_key")
		var dbName string
		if err := d.DB.QueryRow("SELECT pg_catalog.current_database()").Scan(&dbName); err != nil {
			t.Fatal(err)
		}
		db, err := d.Server.OpenDB(d.Driver)
		if err != nil {
			t.Fatal(err)
		}
		inner, err := postgres.WithInstance(db, &postgres.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer inner.Close()
		k := migratelock.PostgresKey(dbName, "public", postgres.DefaultMigrationsTable)
		if err := inner.Lock(); err != nil {
			t.Fatal(err)
		}
		pgtest.AwaitHolder(t, d.DB, k)
		if err := inner.Unlock(); err != nil {
			t.Fatal(err)
		}
		pgtest.AwaitFree(t, d.DB, k)
	})
}
