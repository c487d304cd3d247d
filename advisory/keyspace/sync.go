package keyspace

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/ownschema"
)

// DefaultTable is the dictionary table [Registry.Sync] writes when no
// [Table] option names another. It is in schema pgadvisory, which holds
// the library's own objects whatever the session's search_path; Sync
// creates the schema when it creates the table and finds the schema
// missing, which needs CREATE on the database.
const DefaultTable = "pgadvisory.namespaces"

// legacyTable is the dictionary table of releases before [DefaultTable],
// which they created in the first schema of the caller's search_path.
const legacyTable = "pgadvisory_namespaces"

// An Option changes what [Registry.Sync] writes.
type Option func(*options)

// options holds what the Options of one call set.
type options struct {
	table        string
	registeredBy string
}

// Table makes [Registry.Sync] use the table name, "table" or
// "schema.table", instead of [DefaultTable]. Each part must be an
// identifier of letters, digits, underscores and dollar signs, not starting
// with a digit, of at most 63 bytes. The name is quoted as written, so
// "Locks" and "locks" are two tables; prefer lower case. A name without a
// schema resolves through the session's search_path: name the schema
// unless every service that syncs has the same one.
func Table(name string) Option { return func(o *options) { o.table = name } }

// RegisteredBy sets what [Registry.Sync] records as registered_by, the
// service that registered a namespace. By default it is the session's
// application_name, or the program's file name when that is empty.
func RegisteredBy(name string) Option {
	return func(o *options) { o.registeredBy = name }
}

// Errors for bad arguments.
var (
	errNilDB     = errors.New("keyspace: nil *sql.DB")
	errBadOption = errors.New("keyspace: bad option")
)

// identRE matches an identifier that is safe to quote as is.
var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]{0,62}$`)

// quoteTable checks a "table" or "schema.table" name and returns it quoted,
// ready to be written into SQL text.
func quoteTable(name string) (string, error) {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return "", fmt.Errorf("%w: Table(%q): want table or schema.table", errBadOption, name)
	}
	for i, p := range parts {
		if !identRE.MatchString(p) {
			return "", fmt.Errorf("%w: Table(%q): %q is not a plain identifier of at most 63 bytes", errBadOption, name, p)
		}
		parts[i] = `"` + p + `"`
	}
	return strings.Join(parts, "."), nil
}

// The statements of Sync. %[1]s is the quoted table name, which quoteTable
// checked; every value is a parameter.
const (
	syncCreateSQL = `CREATE TABLE IF NOT EXISTS %[1]s (` +
		`id integer PRIMARY KEY, ` +
		`name pg_catalog.text NOT NULL UNIQUE CHECK (name <> ''), ` +
		`owner pg_catalog.text NOT NULL DEFAULT '', ` +
		`doc pg_catalog.text NOT NULL DEFAULT '', ` +
		`registered_by pg_catalog.text NOT NULL DEFAULT '', ` +
		`updated_at pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now())`
	syncProbeSQL  = `SELECT pg_catalog.to_regclass($1) IS NOT NULL, pg_catalog.current_setting('application_name')`
	syncSelectSQL = `SELECT id, name, owner, doc, registered_by FROM %[1]s`
	syncInsertSQL = `INSERT INTO %[1]s (id, name, owner, doc, registered_by) VALUES ($1, $2, $3, $4, $5)`
	syncUpdateSQL = `UPDATE %[1]s SET owner = $3, doc = $4, updated_at = pg_catalog.now() ` +
		`WHERE id = $1 AND name = $2 AND registered_by = $5`
)

// libraryRegisteredBy is the registered_by of the library's own row.
const libraryRegisteredBy = "pgadvisory"

// row is a namespace read from the dictionary table.
type row struct {
	ns advisory.Namespace
	by string
}

// Sync records r's namespaces in a dictionary table that every service
// using the database shares, so that a namespace ID or name claimed by two
// services is caught when the second one starts. It creates the table if
// it is missing ([DefaultTable], or the one [Table] names),
// with the columns id, name, owner, doc, registered_by and updated_at, and
// writes a row for each registered namespace and one for the library's own
// namespace. Once the table exists, Sync needs only SELECT, INSERT and
// UPDATE on it (and USAGE on its schema).
//
// Sync does not create [DefaultTable] while a table named
// pgadvisory_namespaces, the default of earlier releases, exists in any
// schema: it returns an error that says how to move that table into
// schema pgadvisory, or to keep using it with [Table].
//
// Sync runs in one READ COMMITTED transaction that first takes a
// transaction lock on advisory.PairKey([ReservedMinID], 1), so that processes
// syncing at once, the table's creation included, take turns. It never
// deletes a row, and never changes one registered by another service: a
// row with the same ID and name is the same namespace, which Sync updates
// (owner, doc, updated_at) only when registered_by is its own (see
// [RegisteredBy]).
//
// A row with a namespace's ID but another name, or its name but another
// ID, is a conflict. Sync then writes nothing and returns an error that
// lists every conflict, each a [*ConflictError] matching [ErrConflict].
// The wait for the lock ends with ctx.
func (r *Registry) Sync(ctx context.Context, db *sql.DB, opts ...Option) error {
	if db == nil {
		return errNilDB
	}
	o := options{table: DefaultTable}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	table, err := quoteTable(o.table)
	if err != nil {
		return err
	}
	mine := append([]advisory.Namespace{libraryNamespace}, r.Namespaces()...)
	err = advisory.WithXactLock(ctx, db, syncKey, func(ctx context.Context, tx *sql.Tx) error {
		return syncTx(ctx, tx, table, o.table == DefaultTable, o.registeredBy, mine)
	}, advisory.TxOptions(&sql.TxOptions{Isolation: sql.LevelReadCommitted}))
	if err != nil {
		return fmt.Errorf("keyspace: sync namespaces to %s: %w", table, err)
	}
	return nil
}

// syncTx does the work of Sync in tx, which holds the sync lock, on the
// quoted table, which is DefaultTable when byDefault.
func syncTx(ctx context.Context, tx *sql.Tx, table string, byDefault bool, by string, mine []advisory.Namespace) error {
	// Create the table only when it is missing: CREATE TABLE IF NOT
	// EXISTS needs the CREATE privilege on the schema even when the table
	// exists, which a service's role may well lack.
	var exists bool
	var appName string
	if err := tx.QueryRowContext(ctx, syncProbeSQL, table).Scan(&exists, &appName); err != nil {
		return fmt.Errorf("look for the table: %w", err)
	}
	if !exists {
		var def *ownschema.Default
		if byDefault {
			def = &ownschema.Default{Table: DefaultTable, Legacy: legacyTable, Option: "keyspace.Table"}
		}
		if err := ownschema.PrepareCreate(ctx, tx, table, def); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(syncCreateSQL, table)); err != nil {
			return fmt.Errorf("create table: %w", err)
		}
	}
	if by == "" {
		by = appName
	}
	if by == "" {
		by = filepath.Base(os.Args[0])
	}
	byID, byName, err := readRows(ctx, tx, table)
	if err != nil {
		return err
	}

	var conflicts []*ConflictError
	for _, ns := range mine {
		if old, ok := byID[ns.ID]; ok {
			if c := conflict(ns, old.ns, old.by); c != nil {
				conflicts = append(conflicts, c)
			}
		}
		if old, ok := byName[ns.Name]; ok {
			if c := conflict(ns, old.ns, old.by); c != nil {
				conflicts = append(conflicts, c)
			}
		}
	}
	if len(conflicts) > 0 {
		return &syncConflictError{conflicts: conflicts}
	}

	for _, ns := range mine {
		nsBy := by
		if ns.ID == libraryNamespace.ID {
			nsBy = libraryRegisteredBy
		}
		old, ok := byID[ns.ID]
		var stmt string
		switch {
		case !ok:
			stmt = syncInsertSQL
		case old.by == nsBy && (old.ns.Owner != ns.Owner || old.ns.Doc != ns.Doc):
			stmt = syncUpdateSQL
		default:
			continue // up to date, or another service's row
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(stmt, table), ns.ID, ns.Name, ns.Owner, ns.Doc, nsBy); err != nil {
			return fmt.Errorf("write namespace %s: %w", describe(ns), err)
		}
	}
	return nil
}

// readRows reads the whole dictionary table, indexed by ID and by name.
func readRows(ctx context.Context, tx *sql.Tx, table string) (map[int32]row, map[string]row, error) {
	rows, err := tx.QueryContext(ctx, fmt.Sprintf(syncSelectSQL, table))
	if err != nil {
		return nil, nil, fmt.Errorf("read table: %w", err)
	}
	defer rows.Close()
	byID := make(map[int32]row)
	byName := make(map[string]row)
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.ns.ID, &r.ns.Name, &r.ns.Owner, &r.ns.Doc, &r.by); err != nil {
			return nil, nil, fmt.Errorf("read table: %w", err)
		}
		byID[r.ns.ID] = r
		byName[r.ns.Name] = r
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("read table: %w", err)
	}
	return byID, byName, nil
}

// syncConflictError lists every conflict Sync found.
type syncConflictError struct {
	conflicts []*ConflictError
}

// Error counts the conflicts and describes each on a line of its own.
func (e *syncConflictError) Error() string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(len(e.conflicts)))
	if len(e.conflicts) == 1 {
		b.WriteString(" namespace conflict:")
	} else {
		b.WriteString(" namespace conflicts:")
	}
	for _, c := range e.conflicts {
		b.WriteString("\n\t")
		b.WriteString(strings.TrimPrefix(c.Error(), "keyspace: namespace conflict: "))
	}
	return b.String()
}

// Unwrap returns every conflict.
func (e *syncConflictError) Unwrap() []error {
	errs := make([]error, len(e.conflicts))
	for i, c := range e.conflicts {
		errs[i] = c
	}
	return errs
}
