// Package ownschema creates the schema that holds the library's own
// objects, [sqltext.Schema], for the packages whose default tables live
// there (idempotency and keyspace), and finds the tables that earlier
// releases created elsewhere.
package ownschema

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/pgadvisory/pgadvisory/internal/scope"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// savepoint names the savepoint under which [Ensure] creates the schema.
const savepoint = "pgadvisory_schema"

// Holds reports whether the quoted table name ("table" or
// "schema"."table", as the packages quote it) is in [sqltext.Schema].
func Holds(table string) bool {
	return strings.HasPrefix(table, `"`+sqltext.Schema+`".`)
}

// Ensure creates [sqltext.Schema] in tx when it is missing. It looks
// first, since CREATE SCHEMA needs CREATE on the database even when the
// schema exists, and a role that finds it made by an administrator needs
// no such privilege. It creates it under a savepoint, so that losing a
// race with another session that creates it at the same time (SQLSTATE
// 23505 or 42P06) leaves tx usable, with the other's schema.
func Ensure(ctx context.Context, tx *sql.Tx) error {
	var exists bool
	if err := tx.QueryRowContext(ctx, sqltext.SchemaExists).Scan(&exists); err != nil {
		return fmt.Errorf("look for schema %s: %w", sqltext.Schema, err)
	}
	if exists {
		return nil
	}
	if _, err := tx.ExecContext(ctx, "SAVEPOINT "+savepoint); err != nil {
		return fmt.Errorf("create schema %s: %w", sqltext.Schema, err)
	}
	_, err := tx.ExecContext(ctx, sqltext.CreateSchema)
	end := "RELEASE SAVEPOINT " + savepoint
	switch code := scope.SQLState(err); {
	case err == nil:
	case code == "23505", code == "42P06":
		end, err = "ROLLBACK TO SAVEPOINT "+savepoint, nil // another session made it
	case code == "42501":
		return fmt.Errorf("create schema %s, which needs CREATE on the database (or an administrator can run: "+
			"CREATE SCHEMA %[1]s; GRANT USAGE, CREATE ON SCHEMA %[1]s TO role): %w", sqltext.Schema, err)
	default:
		return fmt.Errorf("create schema %s: %w", sqltext.Schema, err)
	}
	if _, err := tx.ExecContext(ctx, end); err != nil {
		return fmt.Errorf("create schema %s: %w", sqltext.Schema, err)
	}
	return nil
}

// Legacy returns the schemas that hold a table named name, as earlier
// releases created their default tables, unqualified, in the first schema
// of the caller's search_path.
func Legacy(ctx context.Context, tx *sql.Tx, name string) ([]string, error) {
	rows, err := tx.QueryContext(ctx, sqltext.TablesNamed, name)
	if err != nil {
		return nil, fmt.Errorf("look for %s: %w", name, err)
	}
	defer rows.Close()
	var schemas []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, fmt.Errorf("look for %s: %w", name, err)
		}
		schemas = append(schemas, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("look for %s: %w", name, err)
	}
	return schemas, nil
}

// LegacyError says that table, a package's default table (as
// "pgadvisory.name"), is missing while tables named legacy, the default of
// an earlier release, exist in schemas, and how to move one in or keep
// using it with option, the package's option that names a table.
func LegacyError(legacy string, schemas []string, table, option string) error {
	old := schemas[0] + "." + legacy
	name := table[strings.IndexByte(table, '.')+1:]
	return fmt.Errorf("%s, the default table of an earlier release, exists (in schema %s) and %s does not: "+
		"move it with CREATE SCHEMA IF NOT EXISTS %s; ALTER TABLE %s SET SCHEMA %s; ALTER TABLE %s.%s RENAME TO %s; "+
		"or keep using it with %s(%q)",
		legacy, strings.Join(schemas, ", "), table,
		sqltext.Schema, old, sqltext.Schema, sqltext.Schema, legacy, name, option, old)
}

// A Default is a package's default table: its name (as
// "pgadvisory.name"), the name of an earlier release's default, and the
// package's option that names a table.
type Default struct {
	Table, Legacy, Option string
}

// PrepareCreate readies tx to create the quoted table: when the table is
// the package's default (def not nil), it refuses to create it beside an
// earlier release's, and it creates [sqltext.Schema] when the table goes
// there and the schema is missing.
func PrepareCreate(ctx context.Context, tx *sql.Tx, table string, def *Default) error {
	if def != nil {
		schemas, err := Legacy(ctx, tx, def.Legacy)
		if err != nil {
			return err
		}
		if len(schemas) > 0 {
			return LegacyError(def.Legacy, schemas, def.Table, def.Option)
		}
	}
	if Holds(table) {
		return Ensure(ctx, tx)
	}
	return nil
}
