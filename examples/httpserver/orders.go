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
	"github.com/pgadvisory/pgadvisory/middleware/httplock"
)

// ordersNS is the lock namespace of orders: order 42's key is
// PairKey(ordersNS, 42).
const ordersNS = 1

// store is the program's table, in a schema of its own so that runs on one
// database never meet.
type store struct {
	db     *sql.DB
	schema string // a quoted identifier
}

// newStore creates a fresh schema with orders 42 and 43, unpaid.
func newStore(ctx context.Context, db *sql.DB) (*store, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	s := &store{db: db, schema: `"pgadvisory_httpserver_` + hex.EncodeToString(b[:]) + `"`}
	for _, q := range []string{
		"CREATE SCHEMA " + s.schema,
		"CREATE TABLE " + s.orders() + " (id int PRIMARY KEY, payments int NOT NULL DEFAULT 0)",
		"INSERT INTO " + s.orders() + " (id) VALUES (42), (43)",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			s.drop()
			return nil, fmt.Errorf("create tables: %w", err)
		}
	}
	return s, nil
}

func (s *store) orders() string { return s.schema + ".orders" }

// drop removes the schema, even after the run's context ended.
func (s *store) drop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = s.db.ExecContext(ctx, "DROP SCHEMA IF EXISTS "+s.schema+" CASCADE")
}

// queryRower is what *sql.DB and *sql.Conn share for reading a row.
type queryRower interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// payments returns the committed payments of order id, read through q.
func (s *store) payments(ctx context.Context, q queryRower, id int) (int, error) {
	var n int
	err := q.QueryRowContext(ctx, "SELECT payments FROM "+s.orders()+" WHERE id = $1", id).Scan(&n)
	return n, err
}

// app is the HTTP application: POST /orders/{id} records a payment.
type app struct {
	store *store
	// paused and resume let the program hold a request inside its
	// handler, with the lock held, as slow work would: a request with
	// ?pause sends on paused and waits for resume.
	paused chan struct{}
	resume chan struct{}
	// checked holds a handler after its response has gone out, until
	// the client has looked at the database: each receive lets one
	// waiting handler return. So the client sees the database as it is
	// before the handler returns, which proves that the commit came
	// before the response, not after the handler.
	checked chan struct{}
}

// handler returns the routes, with the payment behind the lock.
func (a *app) handler(db *sql.DB) http.Handler {
	lock := httplock.XactLock(db, httplock.PathKey(ordersNS, "id"))
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}", lock(http.HandlerFunc(a.pay)))
	return mux
}

// pay records one payment for the order in the request's transaction. The
// middleware commits it before the 200 goes out.
func (a *app) pay(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	tx, _ := advisory.TxFromContext(ctx)
	id, _ := strconv.Atoi(r.PathValue("id")) // PathKey has checked it
	var n int
	err := tx.QueryRowContext(ctx, "UPDATE "+a.store.orders()+" SET payments = payments + 1 WHERE id = $1 RETURNING payments", id).Scan(&n)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		http.Error(w, "no such order", http.StatusNotFound) // rolls back
		return
	case err != nil:
		http.Error(w, "could not record the payment", http.StatusInternalServerError) // rolls back
		return
	}
	if r.URL.Query().Has("pause") {
		a.paused <- struct{}{}
		select {
		case <-a.resume:
		case <-ctx.Done():
			return
		}
	}
	fmt.Fprintf(w, "order %d: payment %d recorded\n", id, n) // commits, then writes
	// Send the response now, and stay in the handler until the client
	// has checked the payment from another connection.
	if err := http.NewResponseController(w).Flush(); err != nil {
		return
	}
	select {
	case <-a.checked:
	case <-ctx.Done():
	}
}
