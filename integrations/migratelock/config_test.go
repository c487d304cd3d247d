package migratelock_test

import (
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/golang-migrate/migrate/v4/database"
	"github.com/golang-migrate/migrate/v4/database/postgres"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/integrations/migratelock"
)

// TestConfig checks that WithInstance takes configs in range and refuses
// the others with an error matching advisory.ErrBadOption.
func TestConfig(t *testing.T) {
	t.Parallel()
	inner := &postgres.Postgres{}
	db := &sql.DB{}
	cases := []struct {
		name string
		cfg  migratelock.Config
		bad  bool
	}{
		{"Zero", migratelock.Config{}, false},
		{"LockTimeout", migratelock.Config{LockTimeout: time.Minute}, false},
		{"LockTimeoutNegative", migratelock.Config{LockTimeout: -time.Second}, true},
		{"Heartbeat", migratelock.Config{Heartbeat: time.Second}, false},
		{"HeartbeatTooShort", migratelock.Config{Heartbeat: time.Microsecond}, true},
		{"HeartbeatNegative", migratelock.Config{Heartbeat: -time.Second}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := migratelock.WithInstance(inner, db, &c.cfg)
			switch {
			case c.bad && !errors.Is(err, advisory.ErrBadOption):
				t.Errorf("WithInstance = %v; want an error matching advisory.ErrBadOption", err)
			case !c.bad && err != nil:
				t.Errorf("WithInstance = %v; want nil", err)
			}
		})
	}
}

// TestWithInstanceNil checks that WithInstance refuses a nil driver, pool
// or config.
func TestWithInstanceNil(t *testing.T) {
	t.Parallel()
	inner, db, cfg := &postgres.Postgres{}, &sql.DB{}, &migratelock.Config{}
	for name, call := range map[string]func() error{
		"Driver": func() error { _, err := migratelock.WithInstance(nil, db, cfg); return err },
		"DB":     func() error { _, err := migratelock.WithInstance(inner, nil, cfg); return err },
		"Config": func() error { _, err := migratelock.WithInstance(inner, db, nil); return err },
	} {
		if call() == nil {
			t.Errorf("WithInstance with a nil %s = nil; want an error", name)
		}
	}
}

// TestUnlockWithoutLock checks that Unlock without Lock returns
// database.ErrNotLocked, as migrate's drivers do, and that Open is
// refused.
func TestUnlockWithoutLock(t *testing.T) {
	t.Parallel()
	drv, err := migratelock.WithInstance(&postgres.Postgres{}, &sql.DB{}, &migratelock.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := drv.Unlock(); !errors.Is(err, database.ErrNotLocked) {
		t.Errorf("Unlock = %v; want an error matching database.ErrNotLocked", err)
	}
	if _, err := drv.Open("postgres://localhost/x"); err == nil {
		t.Error("Open = nil error; want it refused")
	}
}

// TestPostgresKey checks PostgresKey against the id migrate's
// database.GenerateAdvisoryLockId prints for the same names.
func TestPostgresKey(t *testing.T) {
	t.Parallel()
	cases := []struct{ db, schema, table string }{
		{"app", "public", "schema_migrations"},
		{"postgres", "public", "schema_migrations"},
		{"app", "billing", "migrations"},
	}
	for _, c := range cases {
		id, err := database.GenerateAdvisoryLockId(c.db, c.schema, c.table)
		if err != nil {
			t.Fatal(err)
		}
		k := migratelock.PostgresKey(c.db, c.schema, c.table)
		if k.String() != id {
			t.Errorf("PostgresKey(%q, %q, %q) = %v; want %s", c.db, c.schema, c.table, k, id)
		}
	}
}
