package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgxlock"
)

// migrationsNS is the lock namespace of migrations: the key of one
// schema's migrations is NameKey(migrationsNS, schema).
const migrationsNS = 2

// A step is one migration: version orders the steps, and up is its SQL,
// given the schema's quoted name. Step 2 is data, not DDL: applied twice,
// it would insert its rows twice.
type step struct {
	version int
	name    string
	up      func(schema string) string
}

var steps = []step{
	{1, "create accounts", func(s string) string {
		return "CREATE TABLE " + s + ".accounts (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, name text NOT NULL)"
	}},
	{2, "seed accounts", func(s string) string {
		return "INSERT INTO " + s + ".accounts (name) VALUES ('ada'), ('grace')"
	}},
	{3, "add email", func(s string) string {
		return "ALTER TABLE " + s + ".accounts ADD COLUMN email text; " +
			"UPDATE " + s + ".accounts SET email = name || '@example.com'"
	}},
	{4, "index email", func(s string) string {
		return "CREATE UNIQUE INDEX accounts_email ON " + s + ".accounts (email)"
	}},
}

// migrator migrates one schema, of its own so that runs on one database
// never meet. Besides schema_migrations, which a real migrator keeps, it
// records every application of a step in applied_log, so that the
// database can tell how often each step ran.
type migrator struct {
	pool   *pgxpool.Pool
	schema string // a quoted identifier
	key    advisory.Key
	wait   time.Duration // how long a runner waits for the lock

	// beforeStep, when set, runs in a step's transaction before the
	// step's SQL; tests use it to end a runner's session mid-migration.
	beforeStep func(ctx context.Context, tx pgx.Tx, runner, version int) error
}

// newMigrator creates a fresh, empty schema to migrate, whose runners
// wait up to wait for the lock.
func newMigrator(ctx context.Context, pool *pgxpool.Pool, wait time.Duration) (*migrator, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	name := "pgadvisory_pgxmigrate_" + hex.EncodeToString(b[:])
	// The name is lower-case hex only, so quoting it is enough.
	m := &migrator{pool: pool, schema: `"` + name + `"`, key: advisory.NameKey(migrationsNS, name), wait: wait}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+m.schema); err != nil {
		return nil, fmt.Errorf("create schema: %w", err)
	}
	return m, nil
}

// t returns the qualified name of one of the schema's tables.
func (m *migrator) t(name string) string { return m.schema + "." + name }

// drop removes the schema, even after the run's context ended.
func (m *migrator) drop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = m.pool.Exec(ctx, "DROP SCHEMA "+m.schema+" CASCADE")
}

// report is what one runner did.
type report struct {
	applied int // steps it applied
	skipped int // steps already applied when it held the lock
}

// migrate is one runner: it waits up to m.wait for the migration lock,
// then applies, in order, each step that schema_migrations does not list.
// The lock is a session lock on the connection the steps' transactions
// run on, so it cannot outlive them: if the session ends, the step in
// flight rolls back with it, and the lock goes to the next runner. A wait
// that runs out returns an error matching advisory.ErrLockTimeout, having
// applied nothing.
func (m *migrator) migrate(ctx context.Context, runner int) (report, error) {
	var r report
	err := pgxlock.WithSessionLock(ctx, m.pool, m.key, func(ctx context.Context, conn *pgxpool.Conn) error {
		// Under the lock, so that two first runs do not race to create it.
		if err := m.createTables(ctx, conn); err != nil {
			return err
		}
		for _, s := range steps {
			applied, err := m.apply(ctx, conn, s, runner)
			if err != nil {
				return fmt.Errorf("step %d (%s): %w", s.version, s.name, err)
			}
			if applied {
				r.applied++
			} else {
				r.skipped++
			}
		}
		return nil
	}, advisory.Wait(m.wait))
	return r, err
}

// createTables creates schema_migrations and applied_log if they are not
// there yet.
func (m *migrator) createTables(ctx context.Context, conn *pgxpool.Conn) error {
	_, err := conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+m.t("schema_migrations")+
		" (version int PRIMARY KEY, name text NOT NULL, applied_by int NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());"+
		" CREATE TABLE IF NOT EXISTS "+m.t("applied_log")+" (version int NOT NULL, runner int NOT NULL)")
	if err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	return nil
}

// apply applies step s in a transaction of its own on conn, the lock's
// session, unless schema_migrations lists it, and records it there in the
// same transaction, so that a step and its record commit together or not
// at all. It reports whether it applied the step.
func (m *migrator) apply(ctx context.Context, conn *pgxpool.Conn, s step, runner int) (bool, error) {
	applied := false
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		// Look under the lock: another runner may have applied the step
		// while this one waited for the lock.
		var done bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT FROM "+m.t("schema_migrations")+" WHERE version = $1)", s.version).Scan(&done); err != nil || done {
			return err
		}
		if m.beforeStep != nil {
			if err := m.beforeStep(ctx, tx, runner, s.version); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, s.up(m.schema)); err != nil {
			return err
		}
		// The primary key is the backstop: a second application of a step,
		// by a runner that skipped the lock, fails here and rolls back.
		if _, err := tx.Exec(ctx, "INSERT INTO "+m.t("schema_migrations")+" (version, name, applied_by) VALUES ($1, $2, $3)", s.version, s.name, runner); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+m.t("applied_log")+" (version, runner) VALUES ($1, $2)", s.version, runner); err != nil {
			return err
		}
		applied = true
		return nil
	})
	return applied && err == nil, err
}

// appliedOnce counts the steps that were applied exactly once, by the
// runner that schema_migrations names, and checks the data step's effect:
// two accounts, not four.
func (m *migrator) appliedOnce(ctx context.Context) (int, error) {
	var once, accounts int
	err := m.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM `+m.t("schema_migrations")+` s
			WHERE (SELECT count(*) FROM `+m.t("applied_log")+` l WHERE l.version = s.version) = 1
			AND NOT EXISTS (SELECT FROM `+m.t("applied_log")+` l WHERE l.version = s.version AND l.runner <> s.applied_by)),
		(SELECT count(*) FROM `+m.t("accounts")+`)`).Scan(&once, &accounts)
	if err != nil {
		return 0, err
	}
	if accounts != 2 {
		return 0, fmt.Errorf("accounts has %d rows, want 2: the seed step ran more than once", accounts)
	}
	return once, nil
}
