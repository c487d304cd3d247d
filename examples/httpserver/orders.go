package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// orders is the order table, in a schema of its own so that runs on one
// database never meet.
type orders struct {
	db     *sql.DB
	schema string        // a quoted identifier
	hold   time.Duration // how long pay holds the order's lock
}

// createOrders creates a fresh schema with orders 42 and 43, unpaid.
func createOrders(ctx context.Context, db *sql.DB, hold time.Duration) (*orders, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	// The name is lower-case hex only, so quoting it is enough.
	o := &orders{db: db, schema: `"pgadvisory_httpserver_` + hex.EncodeToString(b[:]) + `"`, hold: hold}
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+o.schema); err != nil {
		return nil, fmt.Errorf("create schema: %w", err)
	}
	for _, q := range []string{
		"CREATE TABLE " + o.table() + " (id int PRIMARY KEY, payments int NOT NULL DEFAULT 0)",
		"INSERT INTO " + o.table() + " (id) VALUES (42), (43)",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			o.drop()
			return nil, fmt.Errorf("create orders: %w", err)
		}
	}
	return o, nil
}

func (o *orders) table() string { return o.schema + ".orders" }

// drop removes the schema, even after the run's context ended.
func (o *orders) drop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = o.db.ExecContext(ctx, "DROP SCHEMA "+o.schema+" CASCADE")
}

// pay records one payment for the order, in the request's transaction,
// which holds the order's lock. The middleware commits it as the 200 is
// written, before it goes out; an error status rolls it back.
func (o *orders) pay(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	tx, _ := advisory.TxFromContext(ctx)
	id, _ := strconv.Atoi(r.PathValue("id")) // the key function has checked it
	var n int
	err := tx.QueryRowContext(ctx, "UPDATE "+o.table()+" SET payments = payments + 1 WHERE id = $1 RETURNING payments", id).Scan(&n)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		http.Error(w, "no such order", http.StatusNotFound)
		return
	case err != nil:
		http.Error(w, "could not record the payment", http.StatusInternalServerError)
		return
	}
	select {
	case <-time.After(o.hold): // slow work, under the lock
	case <-ctx.Done():
		return
	}
	fmt.Fprintf(w, "order %d: payment %d recorded\n", id, n)
}
