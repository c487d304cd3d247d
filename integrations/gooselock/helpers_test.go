package gooselock_test

import (
	"database/sql"
	"errors"
	"io/fs"
	"testing"
	"testing/fstest"

	"github.com/pressly/goose/v3"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/integrations/gooselock"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// gateKey is the key a migration waits for while a test holds it, so that
// the test decides when the migration goes on. Each test runs in a
// database of its own, where fixed keys meet no other test's.
const gateKey = 777

// A lockerKind is one of the package's two lockers, as a goose option.
type lockerKind struct {
	name string
	// option returns a new locker of the kind on key, as a Provider
	// option.
	option func(t *testing.T, key advisory.Key, opts ...gooselock.Option) goose.ProviderOption
}

// kinds are the package's lockers, for table tests.
var kinds = []lockerKind{
	{"SessionLocker", func(t *testing.T, key advisory.Key, opts ...gooselock.Option) goose.ProviderOption {
		t.Helper()
		l, err := gooselock.NewSessionLocker(key, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return goose.WithSessionLocker(l)
	}},
	{"Locker", func(t *testing.T, key advisory.Key, opts ...gooselock.Option) goose.ProviderOption {
		t.Helper()
		l, err := gooselock.NewLocker(key, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return goose.WithLocker(l)
	}},
}

// newProvider returns a goose Provider for PostgreSQL on db that runs
// the migrations of fsys under lockOpt, closed at t's cleanup.
func newProvider(t *testing.T, db *sql.DB, fsys fs.FS, lockOpt goose.ProviderOption) *goose.Provider {
	t.Helper()
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys, lockOpt, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// gatedMigrations are two SQL migrations, each in a transaction. Each
// records its version and the backend that ran it in public.applied; the
// first then waits for gateKey as a shared transaction lock, so that a
// test holding gateKey keeps it there.
var gatedMigrations = fstest.MapFS{
	"00001_gate.sql": {Data: []byte(`-- +goose Up
CREATE TABLE public.applied (version bigint NOT NULL, pid int NOT NULL);
INSERT INTO public.applied VALUES (1, pg_catalog.pg_backend_pid());
SELECT pg_catalog.pg_advisory_xact_lock_shared(777);
-- +goose Down
DROP TABLE public.applied;
`)},
	"00002_second.sql": {Data: []byte(`-- +goose Up
INSERT INTO public.applied VALUES (2, pg_catalog.pg_backend_pid());
-- +goose Down
DELETE FROM public.applied WHERE version = 2;
`)},
}

// plainMigrations are three SQL migrations that only create tables.
var plainMigrations = fstest.MapFS{
	"00001_a.sql": {Data: []byte("-- +goose Up\nCREATE TABLE public.a (id int);\n-- +goose Down\nDROP TABLE public.a;\n")},
	"00002_b.sql": {Data: []byte("-- +goose Up\nCREATE TABLE public.b (id int);\n-- +goose Down\nDROP TABLE public.b;\n")},
	"00003_c.sql": {Data: []byte("-- +goose Up\nCREATE TABLE public.c (id int);\n-- +goose Down\nDROP TABLE public.c;\n")},
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

// versionCounts returns how often goose's version table records each
// version as applied.
func versionCounts(t *testing.T, db *sql.DB) map[int64]int {
	t.Helper()
	rows, err := db.Query("SELECT version_id, count(*) FROM public.goose_db_version WHERE is_applied GROUP BY version_id")
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

// requireLost fails t unless err matches advisory.ErrLockLost.
func requireLost(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, advisory.ErrLockLost) {
		t.Fatalf("%s = %v; want an error matching advisory.ErrLockLost", what, err)
	}
}
