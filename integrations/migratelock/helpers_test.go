package migratelock_test

import (
	"database/sql"
	"errors"
	"testing"
	"testing/fstest"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database/postgres"
	"github.com/golang-migrate/migrate/v4/source/iofs"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/integrations/migratelock"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// key is the key the tests' Drivers take. Each test runs in a database of
// its own, where fixed keys meet no other test's.
var key = advisory.PairKey(7, 1)

// gateKey is the key a migration waits for while a test holds it, so that
// the test decides when the migration goes on.
const gateKey = 777

// gatedMigrations are two migrations. Each records its version and the
// backend that ran it in public.applied; the first then waits for gateKey
// as a shared transaction lock, so that a test holding gateKey keeps it
// there.
var gatedMigrations = fstest.MapFS{
	"1_gate.up.sql": {Data: []byte(`CREATE TABLE public.applied (version bigint NOT NULL, pid int NOT NULL);
INSERT INTO public.applied VALUES (1, pg_catalog.pg_backend_pid());
SELECT pg_catalog.pg_advisory_xact_lock_shared(777);`)},
	"1_gate.down.sql":   {Data: []byte(`DROP TABLE public.applied;`)},
	"2_second.up.sql":   {Data: []byte(`INSERT INTO public.applied VALUES (2, pg_catalog.pg_backend_pid());`)},
	"2_second.down.sql": {Data: []byte(`DELETE FROM public.applied WHERE version = 2;`)},
}

// wrap returns migrate's postgres driver on a connection of db, wrapped
// in a migratelock Driver as cfg says (its Key set to key when zero).
// Its Close, which the Migrate's Close calls, closes db.
func wrap(t *testing.T, db *sql.DB, cfg migratelock.Config) *migratelock.Driver {
	t.Helper()
	inner, err := postgres.WithInstance(db, &postgres.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Key == (advisory.Key{}) {
		cfg.Key = key
	}
	drv, err := migratelock.WithInstance(inner, db, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	return drv
}

// newMigrate returns a Migrate that runs gatedMigrations on a new pool of
// tg's database under a Driver configured as cfg says, closed at t's
// cleanup.
func newMigrate(t *testing.T, tg pgtest.Target, cfg migratelock.Config) (*migrate.Migrate, *migratelock.Driver) {
	t.Helper()
	db, err := tg.Server.OpenDB(tg.Driver)
	if err != nil {
		t.Fatal(err)
	}
	drv := wrap(t, db, cfg)
	src, err := iofs.New(gatedMigrations, ".")
	if err != nil {
		t.Fatal(err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "postgres", drv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srcErr, dbErr := m.Close()
		if err := errors.Join(srcErr, dbErr); err != nil {
			t.Errorf("Migrate.Close: %v", err)
		}
	})
	return m, drv
}

// holdGate takes gateKey on a session of its own from db and returns the
// function that releases it.
func holdGate(t *testing.T, db *sql.DB) (release func()) {
	t.Helper()
	conn := pgtest.Conn(t, db)
	pgtest.Exec(t, conn, "SELECT pg_catalog.pg_advisory_lock($1)", gateKey)
	return func() {
		t.Helper()
		pgtest.Exec(t, conn, "SELECT pg_catalog.pg_advisory_unlock($1)", gateKey)
	}
}

// migrationState returns the version and dirty flag that the postgres
// driver's table records.
func migrationState(t *testing.T, db *sql.DB) (version int64, dirty bool) {
	t.Helper()
	if err := db.QueryRow("SELECT version, dirty FROM public.schema_migrations").Scan(&version, &dirty); err != nil {
		t.Fatal(err)
	}
	return version, dirty
}

// appliedCounts returns how often each migration of gatedMigrations ran.
func appliedCounts(t *testing.T, db *sql.DB) map[int64]int {
	t.Helper()
	rows, err := db.Query("SELECT version, count(*) FROM public.applied GROUP BY version")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[int64]int{}
	for rows.Next() {
		var v int64
		var n int
		if err := rows.Scan(&v, &n); err != nil {
			t.Fatal(err)
		}
		got[v] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}
