package idempotency

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/ownschema"
)

// identRE matches an identifier that is safe to quote as is.
var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]{0,62}$`)

// quoteTable checks a "table" or "schema.table" name and returns it quoted,
// ready to be written into SQL text.
func quoteTable(name string) (string, error) {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return "", fmt.Errorf("%w: Table(%q): want table or schema.table", ErrBadOption, name)
	}
	for i, p := range parts {
		if !identRE.MatchString(p) {
			return "", fmt.Errorf("%w: Table(%q): %q is not a plain identifier of at most 63 bytes", ErrBadOption, name, p)
		}
		parts[i] = `"` + p + `"`
	}
	return strings.Join(parts, "."), nil
}

// indexName returns the quoted name of the index on created_at of the
// quoted table: the table's own name with "_created_at", cut to 63 bytes.
// An index lives in its table's schema, so the name has no schema part.
func indexName(table string) string {
	name := strings.Trim(table[strings.LastIndexByte(table, '.')+1:], `"`) + "_created_at"
	if len(name) > 63 {
		name = name[:63]
	}
	return `"` + name + `"`
}

// The statements. %[1]s is the quoted table name, which quoteTable
// checked, and %[2]s the quoted index name made from it; every value is a
// parameter.
const (
	createSQL = `CREATE TABLE IF NOT EXISTS %[1]s (` +
		`key pg_catalog.text PRIMARY KEY, ` +
		`result pg_catalog.bytea, ` +
		`created_at pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now())`
	createIndexSQL = `CREATE INDEX IF NOT EXISTS %[2]s ON %[1]s (created_at)`
	probeSQL       = `SELECT pg_catalog.to_regclass($1) IS NOT NULL`
	selectSQL      = `SELECT result, created_at FROM %[1]s WHERE key = $1`
	insertSQL      = `INSERT INTO %[1]s (key, result) VALUES ($1, $2) RETURNING created_at`
	purgeSQL       = `DELETE FROM %[1]s WHERE created_at < pg_catalog.now() - pg_catalog.make_interval(secs => $1)`
)

// setupKey is the lock that serialises the creation of the tables, and of
// schema pgadvisory, whatever the namespace of the operations: a name no
// operation key can have, since operation keys are checked to contain no
// NUL byte, in [DefaultNamespace], which keyspace reserves.
var setupKey = advisory.NameKey(DefaultNamespace, "\x00setup")

// Setup creates the processed-operations table, [DefaultTable] or the one
// [Table] names, and its index on created_at, if they are missing. [Run]
// does this itself the first time it finds the table missing, unless
// [NoCreate] says otherwise; call Setup from a migration, with a role that
// has the CREATE privilege on the schema (and, for [DefaultTable] when
// schema pgadvisory is missing, on the database), when the roles that
// call Run do not.
//
// The table is
//
//	key        text PRIMARY KEY              -- the operation key
//	result     bytea                         -- what the first run's fn returned
//	created_at timestamptz NOT NULL DEFAULT now()
//
// with an index on created_at for [Purge]. Once it exists, Run needs only
// SELECT and INSERT on it, and Purge DELETE.
//
// Setup runs in one transaction that first takes a transaction lock, the
// same whatever the table or the [Namespace] of Run, so that processes
// creating tables at once take turns. It looks the
// table up before creating it, so that a role without CREATE succeeds
// when the table exists.
//
// Setup does not create [DefaultTable] while a table named
// pgadvisory_idempotency, the default of earlier releases, exists in any
// schema: its records would be ignored, and the operations they record
// run again. It returns an error that says how to move that table into
// schema pgadvisory, or to keep using it with [Table].
func Setup(ctx context.Context, db *sql.DB, opts ...Option) error {
	if db == nil {
		return errNilDB
	}
	o, table, err := parse(opts)
	if err != nil {
		return err
	}
	return setup(ctx, db, table, o.table == DefaultTable)
}

// setup creates the quoted table, which is DefaultTable when byDefault, if
// it is missing.
func setup(ctx context.Context, db *sql.DB, table string, byDefault bool) error {
	err := advisory.WithXactLock(ctx, db, setupKey, func(ctx context.Context, tx *sql.Tx) error {
		var exists bool
		if err := tx.QueryRowContext(ctx, probeSQL, table).Scan(&exists); err != nil {
			return fmt.Errorf("look for the table: %w", err)
		}
		if exists {
			return nil
		}
		var def *ownschema.Default
		if byDefault {
			def = &ownschema.Default{Table: DefaultTable, Legacy: legacyTable, Option: "idempotency.Table"}
		}
		if err := ownschema.PrepareCreate(ctx, tx, table, def); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(createSQL, table)); err != nil {
			return fmt.Errorf("create table: %w", err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(createIndexSQL, table, indexName(table))); err != nil {
			return fmt.Errorf("create index: %w", err)
		}
		return nil
	}, advisory.TxOptions(&sql.TxOptions{Isolation: sql.LevelReadCommitted}))
	if err != nil {
		return fmt.Errorf("idempotency: set up %s: %w", table, err)
	}
	return nil
}

// Purge deletes the records of operations that were first run more than
// olderThan ago, by created_at, and returns how many it deleted. After
// that, a delivery of one of those operations runs fn again: choose
// olderThan longer than any client or queue may retry. Call it
// periodically, for example once an hour with olderThan of a day or a
// week. It needs the DELETE privilege on the table.
//
// A negative olderThan is an error matching [ErrBadOption]. Purge never
// touches a record whose run is in progress: that row is not yet
// committed.
func Purge(ctx context.Context, db *sql.DB, olderThan time.Duration, opts ...Option) (int64, error) {
	if db == nil {
		return 0, errNilDB
	}
	if olderThan < 0 {
		return 0, fmt.Errorf("%w: Purge: negative age %v", ErrBadOption, olderThan)
	}
	_, table, err := parse(opts)
	if err != nil {
		return 0, err
	}
	res, err := db.ExecContext(ctx, fmt.Sprintf(purgeSQL, table), olderThan.Seconds())
	if err != nil {
		return 0, fmt.Errorf("idempotency: purge %s: %w", table, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("idempotency: purge %s: %w", table, err)
	}
	return n, nil
}

// sqlState returns the SQLSTATE of the server error in err's chain, or "".
func sqlState(err error) string {
	var se interface{ SQLState() string }
	if errors.As(err, &se) {
		return se.SQLState()
	}
	return ""
}

// The SQLSTATEs Run reacts to. A table in a schema that does not exist
// is 3F000 on PostgreSQL 15, 42P01 on later releases.
const (
	undefinedTable  = "42P01"
	undefinedSchema = "3F000"
	uniqueViolation = "23505"
)

// CheckTable returns an error matching [ErrBadOption] if name cannot be
// given to [Table], so that a program can refuse a bad name when it
// starts rather than on its first call.
func CheckTable(name string) error {
	_, err := quoteTable(name)
	return err
}
