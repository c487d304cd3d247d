package httplock_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/httplock"
)

// The middleware's own CPU per request, apart from the network and the
// server: XactLock against a handler that does the same transaction by
// hand, both called directly (ServeHTTP on a recorder, no HTTP server),
// on a database/sql driver that answers every statement at once.

// instantDriverName is the name instantDriver is registered under.
const instantDriverName = "pgadvisory-instant"

func init() { sql.Register(instantDriverName, instantDriver{}) }

// instantDriver is a database/sql driver whose connections answer every
// statement at once, without a server: an Exec affects one row (a try
// that took its lock), a query answers one row of true, and the engine
// probe answers as PostgreSQL does. It counts the statements it is sent.
type instantDriver struct{}

// instantStatements counts the statements, BEGIN and COMMIT included, that
// instantDriver's connections were sent.
var instantStatements atomic.Int64

func (instantDriver) Open(string) (driver.Conn, error) { return &instantConn{}, nil }

// instantConn is a connection of instantDriver.
type instantConn struct{ _ int } // not of size zero, so that the library remembers its engine

var (
	_ driver.ExecerContext  = (*instantConn)(nil)
	_ driver.QueryerContext = (*instantConn)(nil)
	_ driver.ConnBeginTx    = (*instantConn)(nil)
)

func (*instantConn) Prepare(string) (driver.Stmt, error) { return nil, driver.ErrSkip }
func (*instantConn) Close() error                        { return nil }
func (c *instantConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (*instantConn) BeginTx(context.Context, driver.TxOptions) (driver.Tx, error) {
	instantStatements.Add(1)
	return instantTx{}, nil
}

func (*instantConn) ExecContext(context.Context, string, []driver.NamedValue) (driver.Result, error) {
	instantStatements.Add(1)
	return driver.RowsAffected(1), nil
}

func (*instantConn) QueryContext(_ context.Context, query string, _ []driver.NamedValue) (driver.Rows, error) {
	instantStatements.Add(1)
	if strings.HasPrefix(query, "SELECT pg_catalog.version(), ") {
		return &instantRows{row: []driver.Value{"PostgreSQL 17.0 on x86_64-pc-linux-gnu", "", nil, nil, nil, nil}}, nil
	}
	return &instantRows{row: []driver.Value{true}}, nil
}

// instantTx is a transaction of instantConn.
type instantTx struct{}

func (instantTx) Commit() error   { instantStatements.Add(1); return nil }
func (instantTx) Rollback() error { instantStatements.Add(1); return nil }

// instantRows is the one row of a query.
type instantRows struct {
	row  []driver.Value
	done bool
}

func (r *instantRows) Columns() []string { return make([]string, len(r.row)) }
func (r *instantRows) Close() error      { return nil }

func (r *instantRows) Next(dest []driver.Value) error {
	if r.done {
		return io.EOF
	}
	r.done = true
	copy(dest, r.row)
	return nil
}

// overheadWork is the handler's own statement, in the request's
// transaction.
const overheadWork = "SELECT 1"

// overheadHandlers are the two handlers of POST /orders/{id} that
// BenchmarkOverhead compares on db.
func overheadHandlers(db *sql.DB) map[string]http.Handler {
	middleware := http.NewServeMux()
	lock := httplock.XactLock(db, httplock.PathInt64Key("id"))
	middleware.Handle("POST /orders/{id}", lock(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := advisory.TxFromContext(r.Context())
		if _, err := tx.ExecContext(r.Context(), overheadWork); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})))
	hand := http.NewServeMux()
	hand.HandleFunc("POST /orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if err != nil {
			http.Error(w, "bad id", http.StatusBadRequest)
			return
		}
		ctx := r.Context()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer tx.Rollback()
		res, err := tx.ExecContext(ctx, "SELECT 1 WHERE pg_catalog.pg_try_advisory_xact_lock("+strconv.FormatInt(id, 10)+")")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if n, _ := res.RowsAffected(); n != 1 {
			http.Error(w, "busy", http.StatusConflict)
			return
		}
		if _, err := tx.ExecContext(ctx, overheadWork); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if err := tx.Commit(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	return map[string]http.Handler{"middleware": middleware, "hand": hand}
}

// BenchmarkOverhead measures the middleware's own CPU and allocations
// per request: BenchmarkOverhead/middleware, XactLock with
// PathInt64Key("id") around a handler that sends one statement in the
// request's transaction, against BenchmarkOverhead/hand, a handler that
// does the same transaction by hand (BEGIN, the try with the key in the
// text, the statement, COMMIT), each called directly on a recorder, on a
// driver that answers at once. The difference is what the middleware and
// the library under it add to a request, apart from the network and the
// server. It needs no server, and reports the statements sent per request
// (statements/op).
func BenchmarkOverhead(b *testing.B) {
	for _, name := range []string{"hand", "middleware"} {
		b.Run(name, func(b *testing.B) {
			db, err := sql.Open(instantDriverName, "")
			if err != nil {
				b.Fatal(err)
			}
			db.SetMaxOpenConns(1)
			b.Cleanup(func() { db.Close() })
			h := overheadHandlers(db)[name]
			serve := func(i int) {
				r := httptest.NewRequest(http.MethodPost, "/orders/"+strconv.Itoa(i+1), nil)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != http.StatusOK {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
			serve(0)
			start := instantStatements.Load()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				serve(i & 1023)
			}
			b.StopTimer()
			b.ReportMetric(float64(instantStatements.Load()-start)/float64(b.N), "statements/op")
		})
	}
}
