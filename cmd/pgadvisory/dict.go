package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/keyspace"
)

// dictionary is what the shared dictionary table says about namespaces.
type dictionary struct {
	table    string
	exists   bool
	registry *keyspace.Registry
}

// Statements on the dictionary table. The table's name is a constant of
// package keyspace, schema-qualified, never input; to_regclass tells
// whether it exists.
const (
	sqlDictionaryExists = `SELECT pg_catalog.to_regclass($1) IS NOT NULL`
	sqlDictionaryRows   = `SELECT id, name, owner, doc FROM ` + keyspace.DefaultTable + ` ORDER BY id`
)

// loadDictionary reads the namespaces of the dictionary table,
// keyspace.DefaultTable, when it exists. A table that exists but cannot be
// read (no SELECT privilege) is an error.
func loadDictionary(ctx context.Context, db *database) (*dictionary, error) {
	d := &dictionary{table: keyspace.DefaultTable, registry: new(keyspace.Registry)}
	if err := db.QueryRowContext(ctx, sqlDictionaryExists, d.table).Scan(&d.exists); err != nil {
		return nil, db.redact.err(fmt.Errorf("looking for the dictionary table %s: %w", d.table, err))
	}
	if !d.exists {
		return d, nil
	}
	rows, err := db.QueryContext(ctx, sqlDictionaryRows)
	if err != nil {
		return nil, db.redact.err(fmt.Errorf("reading the dictionary table %s: %w", d.table, err))
	}
	defer rows.Close()
	for rows.Next() {
		var ns advisory.Namespace
		var owner, doc sql.NullString
		if err := rows.Scan(&ns.ID, &ns.Name, &owner, &doc); err != nil {
			return nil, db.redact.err(fmt.Errorf("reading the dictionary table %s: %w", d.table, err))
		}
		ns.Owner, ns.Doc = owner.String, doc.String
		// The library's own row is known to every registry, and a
		// row that conflicts with an earlier one (which Sync never
		// writes) names nothing reliably: both are skipped.
		if err := d.registry.Register(ns); err != nil && !errors.Is(err, keyspace.ErrReserved) && !errors.Is(err, keyspace.ErrConflict) {
			return nil, fmt.Errorf("dictionary table %s: %w", d.table, err)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, db.redact.err(fmt.Errorf("reading the dictionary table %s: %w", d.table, err))
	}
	return d, nil
}

// byName returns the namespace called name.
func (d *dictionary) byName(name string) (advisory.Namespace, bool) {
	for _, ns := range d.registry.Namespaces() {
		if ns.Name == name {
			return ns, true
		}
	}
	return advisory.Namespace{}, false
}
