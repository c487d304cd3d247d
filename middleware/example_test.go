package middleware_test

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/DATA-DOG/go-sqlmock"
	"github.com/go-chi/chi/v5"
	"github.com/gorilla/mux"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware"
)

// exampleDB stands in for a PostgreSQL database in the examples. It expects
// the statements a request for order 42 sends: BEGIN, the try-lock on
// (7, 42), and then whatever the example adds.
func exampleDB(granted bool) (*sql.DB, sqlmock.Sqlmock) {
	db, m, err := sqlmock.New(sqlmock.QueryMatcherOption(sqlmock.QueryMatcherEqual))
	if err != nil {
		log.Fatal(err)
	}
	m.ExpectBegin()
	affected := int64(0)
	if granted {
		affected = 1
	}
	m.ExpectExec("SELECT 1 WHERE pg_try_advisory_xact_lock(7,42)").WillReturnResult(sqlmock.NewResult(0, affected))
	return db, m
}

// show serves one request and prints the response.
func show(h http.Handler, method, target string) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	fmt.Printf("%d %s", rec.Code, rec.Body)
	if ra := rec.Header().Get("Retry-After"); ra != "" {
		fmt.Printf("Retry-After: %s\n", ra)
	}
}

// pay is an application handler: it works in the request's transaction
// and answers when the work is done.
func pay(w http.ResponseWriter, r *http.Request) {
	tx, _ := middleware.TxFromContext(r.Context())
	if _, err := tx.ExecContext(r.Context(), "UPDATE orders SET paid = true WHERE id = $1", r.PathValue("id")); err != nil {
		http.Error(w, "could not pay", http.StatusInternalServerError) // rolls back
		return
	}
	fmt.Fprintln(w, "paid") // commits, then writes
}

// Wrap a route of Go's ServeMux. The handler runs in a transaction that
// holds the lock on order 42, which commits before the response is
// written.
func ExampleXactLock() {
	db, m := exampleDB(true)
	defer db.Close()
	m.ExpectExec("UPDATE orders SET paid = true WHERE id = $1").WithArgs("42").WillReturnResult(sqlmock.NewResult(0, 1))
	m.ExpectCommit()

	const ordersNS = 7 // the key namespace of orders
	lock := middleware.XactLock(db, middleware.PathKey(ordersNS, "id"))
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}/pay", lock(http.HandlerFunc(pay)))

	show(mux, "POST", "/orders/42/pay")
	fmt.Println(m.ExpectationsWereMet())
	// Output:
	// 200 paid
	// <nil>
}

// A request for an order that another request holds is refused at once,
// without calling the handler.
func ExampleXactLock_conflict() {
	db, m := exampleDB(false) // another session holds (7, 42)
	defer db.Close()
	m.ExpectRollback()

	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}/pay", middleware.XactLock(db, middleware.PathKey(7, "id"))(http.HandlerFunc(pay)))

	show(mux, "POST", "/orders/42/pay")
	// Output:
	// 409 conflict: resource busy, retry later
	// Retry-After: 1
}

// chi fills in r.PathValue, so the path key functions work as they are.
// Attach the middleware to the route with With (or inside Route), so that
// it runs after chi has matched the path.
func ExampleXactLock_chi() {
	db, m := exampleDB(true)
	defer db.Close()
	m.ExpectExec("UPDATE orders SET paid = true WHERE id = $1").WithArgs("42").WillReturnResult(sqlmock.NewResult(0, 1))
	m.ExpectCommit()

	r := chi.NewRouter()
	r.With(middleware.XactLock(db, middleware.PathKey(7, "id"))).Post("/orders/{id}/pay", pay)

	show(r, "POST", "/orders/42/pay")
	// Output:
	// 200 paid
}

// gorilla/mux keeps route variables in mux.Vars, not in r.PathValue; a
// one-line KeyFunc reads them.
func ExampleXactLock_gorillaMux() {
	db, m := exampleDB(true)
	defer db.Close()
	m.ExpectExec("UPDATE orders SET paid = true WHERE id = $1").WithArgs("42").WillReturnResult(sqlmock.NewResult(0, 1))
	m.ExpectCommit()

	key := func(r *http.Request) (advisory.Key, error) { return middleware.IDKey(7, mux.Vars(r)["id"]) }

	payVars := func(w http.ResponseWriter, r *http.Request) {
		tx, _ := middleware.TxFromContext(r.Context())
		if _, err := tx.ExecContext(r.Context(), "UPDATE orders SET paid = true WHERE id = $1", mux.Vars(r)["id"]); err != nil {
			http.Error(w, "could not pay", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "paid")
	}

	r := mux.NewRouter()
	r.HandleFunc("/orders/{id}/pay", payVars).Methods("POST")
	r.Use(middleware.XactLock(db, key)) // gorilla runs it after matching the route

	show(r, "POST", "/orders/42/pay")
	// Output:
	// 200 paid
}

// A status of 400 or more rolls the handler's work back.
func ExampleTxFromContext() {
	db, m := exampleDB(true)
	defer db.Close()
	m.ExpectExec("INSERT INTO refunds (order_id) VALUES ($1)").WithArgs("42").WillReturnResult(sqlmock.NewResult(0, 1))
	m.ExpectRollback()

	refund := func(w http.ResponseWriter, r *http.Request) {
		tx, ok := middleware.TxFromContext(r.Context())
		if !ok {
			http.Error(w, "no transaction", http.StatusInternalServerError)
			return
		}
		if _, err := tx.ExecContext(r.Context(), "INSERT INTO refunds (order_id) VALUES ($1)", r.PathValue("id")); err != nil {
			http.Error(w, "could not refund", http.StatusInternalServerError)
			return
		}
		// A rule found late: the order was never paid. The insert is
		// rolled back before this response is written.
		http.Error(w, "order not paid", http.StatusUnprocessableEntity)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}/refund", middleware.XactLock(db, middleware.PathKey(7, "id"))(http.HandlerFunc(refund)))

	show(mux, "POST", "/orders/42/refund")
	fmt.Println(m.ExpectationsWereMet())
	// Output:
	// 422 order not paid
	// <nil>
}

// Several path parameters name one resource; their values are joined
// unambiguously and hashed, so the same lock can be taken outside HTTP.
func ExamplePathNameKey() {
	key := middleware.PathNameKey(9, "tenant", "doc")
	r := httptest.NewRequest("PUT", "/t/acme/docs/q3-plan", nil)
	r.SetPathValue("tenant", "acme")
	r.SetPathValue("doc", "q3-plan")
	k, err := key(r)
	fmt.Println(err, k == advisory.NameKey(9, middleware.JoinName("acme", "q3-plan")))
	fmt.Println(middleware.JoinName("acme", "q3-plan"))
	// Output:
	// <nil> true
	// 4:acme7:q3-plan
}

// A custom error handler logs the failure and answers in the API's own
// format.
func ExampleErrorHandler() {
	db, m := exampleDB(false)
	defer db.Close()
	m.ExpectRollback()

	apiError := func(w http.ResponseWriter, r *http.Request, err error) {
		status, msg := http.StatusInternalServerError, "internal error"
		switch {
		case errors.Is(err, middleware.ErrBadKey):
			status, msg = http.StatusBadRequest, "bad order id"
		case errors.Is(err, advisory.ErrNotAcquired), errors.Is(err, advisory.ErrLockTimeout):
			w.Header().Set("Retry-After", "2")
			status, msg = http.StatusConflict, "order busy"
		case errors.Is(err, middleware.ErrUnavailable):
			status, msg = http.StatusServiceUnavailable, "try again later"
		}
		// A real handler would log err here; it may hold driver details.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]string{"error": msg})
	}
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}/pay",
		middleware.XactLock(db, middleware.PathKey(7, "id"), middleware.ErrorHandler(apiError))(http.HandlerFunc(pay)))

	show(mux, "POST", "/orders/42/pay")
	show(mux, "POST", "/orders/forty-two/pay")
	// Output:
	// 409 {"error":"order busy"}
	// Retry-After: 2
	// 400 {"error":"bad order id"}
}

// ErrorResponse changes a status and body; here a busy order answers 423
// Locked.
func ExampleErrorResponse() {
	db, m := exampleDB(false)
	defer db.Close()
	m.ExpectRollback()

	lock := middleware.XactLock(db, middleware.PathKey(7, "id"),
		middleware.ErrorResponse(advisory.ErrNotAcquired, http.StatusLocked, "order is being changed"))
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}/pay", lock(http.HandlerFunc(pay)))

	show(mux, "POST", "/orders/42/pay")
	// Output:
	// 423 order is being changed
	// Retry-After: 1
}

// With CommitPolicy, only a 2xx commits: a redirect rolls back.
func ExampleCommitPolicy() {
	db, m := exampleDB(true)
	defer db.Close()
	m.ExpectRollback()

	lock := middleware.XactLock(db, middleware.PathKey(7, "id"),
		middleware.CommitPolicy(func(status int) bool { return status >= 200 && status < 300 }))
	mux := http.NewServeMux()
	mux.Handle("GET /orders/{id}", lock(http.RedirectHandler("/v2/orders/42", http.StatusFound)))

	show(mux, "GET", "/orders/42")
	fmt.Println(m.ExpectationsWereMet())
	// Output:
	// 302 <a href="/v2/orders/42">Found</a>.
	//
	// <nil>
}
