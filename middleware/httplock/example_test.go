package httplock_test

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
	"github.com/pgadvisory/pgadvisory/middleware/httplock"
	"github.com/pgadvisory/pgadvisory/mock"
)

// The key namespace of orders in the examples: order 42's lock is
// advisory.PairKey(ordersNS, 42).
const exampleOrdersNS = 7

var exampleOrder42 = advisory.PairKey(exampleOrdersNS, 42)

// exampleDB stands in for a PostgreSQL database in the examples. Its
// statements are compared as plain text, and package mock lays down the
// ones the middleware sends.
func exampleDB() (*sql.DB, sqlmock.Sqlmock) {
	db, m, err := mock.NewDB(mock.QueryMatcher(sqlmock.QueryMatcherEqual))
	if err != nil {
		log.Fatal(err)
	}
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
	tx, _ := advisory.TxFromContext(r.Context())
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
	db, m := exampleDB()
	defer db.Close()
	mock.ExpectWithXactLock(m, exampleOrder42, mock.XactGranted, advisory.Try())
	m.ExpectExec("UPDATE orders SET paid = true WHERE id = $1").WithArgs("42").WillReturnResult(sqlmock.NewResult(0, 1))
	m.ExpectCommit()

	const ordersNS = 7 // the key namespace of orders
	lock := httplock.XactLock(db, httplock.PathKey(ordersNS, "id"))
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
	db, m := exampleDB()
	defer db.Close()
	mock.ExpectWithXactLock(m, exampleOrder42, mock.XactNotAcquired, advisory.Try()) // another session holds (7, 42)

	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}/pay", httplock.XactLock(db, httplock.PathKey(7, "id"))(http.HandlerFunc(pay)))

	show(mux, "POST", "/orders/42/pay")
	// Output:
	// 409 conflict: resource busy, retry later
	// Retry-After: 1
}

// chi fills in r.PathValue, so the path key functions work as they are.
// Attach the middleware to the route with With (or inside Route), so that
// it runs after chi has matched the path.
func ExampleXactLock_chi() {
	db, m := exampleDB()
	defer db.Close()
	mock.ExpectWithXactLock(m, exampleOrder42, mock.XactGranted, advisory.Try())
	m.ExpectExec("UPDATE orders SET paid = true WHERE id = $1").WithArgs("42").WillReturnResult(sqlmock.NewResult(0, 1))
	m.ExpectCommit()

	r := chi.NewRouter()
	r.With(httplock.XactLock(db, httplock.PathKey(7, "id"))).Post("/orders/{id}/pay", pay)

	show(r, "POST", "/orders/42/pay")
	// Output:
	// 200 paid
}

// gorilla/mux keeps route variables in mux.Vars, not in r.PathValue;
// ValueKey reads them with the checks PathKey makes.
func ExampleXactLock_gorillaMux() {
	db, m := exampleDB()
	defer db.Close()
	mock.ExpectWithXactLock(m, exampleOrder42, mock.XactGranted, advisory.Try())
	m.ExpectExec("UPDATE orders SET paid = true WHERE id = $1").WithArgs("42").WillReturnResult(sqlmock.NewResult(0, 1))
	m.ExpectCommit()

	key := httplock.ValueKey(exampleOrdersNS, func(r *http.Request) string { return mux.Vars(r)["id"] })

	payVars := func(w http.ResponseWriter, r *http.Request) {
		tx, _ := advisory.TxFromContext(r.Context())
		if _, err := tx.ExecContext(r.Context(), "UPDATE orders SET paid = true WHERE id = $1", mux.Vars(r)["id"]); err != nil {
			http.Error(w, "could not pay", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "paid")
	}

	r := mux.NewRouter()
	r.HandleFunc("/orders/{id}/pay", payVars).Methods("POST")
	r.Use(httplock.XactLock(db, key)) // gorilla runs it after matching the route

	show(r, "POST", "/orders/42/pay")
	// Output:
	// 200 paid
}

// A status of 400 or more rolls the handler's work back.
func ExampleTxFromContext() {
	db, m := exampleDB()
	defer db.Close()
	mock.ExpectWithXactLock(m, exampleOrder42, mock.XactGranted, advisory.Try())
	m.ExpectExec("INSERT INTO refunds (order_id) VALUES ($1)").WithArgs("42").WillReturnResult(sqlmock.NewResult(0, 1))
	m.ExpectRollback()

	refund := func(w http.ResponseWriter, r *http.Request) {
		tx, ok := advisory.TxFromContext(r.Context())
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
	mux.Handle("POST /orders/{id}/refund", httplock.XactLock(db, httplock.PathKey(7, "id"))(http.HandlerFunc(refund)))

	show(mux, "POST", "/orders/42/refund")
	fmt.Println(m.ExpectationsWereMet())
	// Output:
	// 422 order not paid
	// <nil>
}

// Several path parameters name one resource; their values are joined
// unambiguously and hashed, so the same lock can be taken outside HTTP.
func ExamplePathNameKey() {
	key := httplock.PathNameKey(9, "tenant", "doc")
	r := httptest.NewRequest("PUT", "/t/acme/docs/q3-plan", nil)
	r.SetPathValue("tenant", "acme")
	r.SetPathValue("doc", "q3-plan")
	k, err := key(r)
	fmt.Println(err, k == advisory.NameKey(9, httplock.JoinName("acme", "q3-plan")))
	fmt.Println(httplock.JoinName("acme", "q3-plan"))
	// Output:
	// <nil> true
	// 4:acme7:q3-plan
}

// A custom error handler logs the failure and answers in the API's own
// format.
func ExampleErrorHandler() {
	db, m := exampleDB()
	defer db.Close()
	mock.ExpectWithXactLock(m, exampleOrder42, mock.XactNotAcquired, advisory.Try())

	apiError := func(w http.ResponseWriter, r *http.Request, err error) {
		status, msg := http.StatusInternalServerError, "internal error"
		switch {
		case errors.Is(err, httplock.ErrBadKey):
			status, msg = http.StatusBadRequest, "bad order id"
		case errors.Is(err, advisory.ErrNotAcquired), errors.Is(err, advisory.ErrLockTimeout):
			w.Header().Set("Retry-After", "2")
			status, msg = http.StatusConflict, "order busy"
		case errors.Is(err, httplock.ErrUnavailable):
			status, msg = http.StatusServiceUnavailable, "try again later"
		}
		// A real handler would log err here; it may hold driver details.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]string{"error": msg})
	}
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}/pay",
		httplock.XactLock(db, httplock.PathKey(7, "id"), httplock.ErrorHandler(apiError))(http.HandlerFunc(pay)))

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
	db, m := exampleDB()
	defer db.Close()
	mock.ExpectWithXactLock(m, exampleOrder42, mock.XactNotAcquired, advisory.Try())

	lock := httplock.XactLock(db, httplock.PathKey(7, "id"),
		httplock.ErrorResponse(advisory.ErrNotAcquired, http.StatusLocked, "order is being changed"))
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}/pay", lock(http.HandlerFunc(pay)))

	show(mux, "POST", "/orders/42/pay")
	// Output:
	// 423 order is being changed
	// Retry-After: 1
}

// With CommitPolicy, only a 2xx commits: a redirect rolls back.
func ExampleCommitPolicy() {
	db, m := exampleDB()
	defer db.Close()
	mock.ExpectWithXactLock(m, exampleOrder42, mock.Rollback, advisory.Try())

	lock := httplock.XactLock(db, httplock.PathKey(7, "id"),
		httplock.CommitPolicy(func(status int) bool { return status >= 200 && status < 300 }))
	mux := http.NewServeMux()
	mux.Handle("GET /orders/{id}", lock(http.RedirectHandler("/v2/orders/42", http.StatusFound)))

	show(mux, "GET", "/orders/42")
	fmt.Println(m.ExpectationsWereMet())
	// Output:
	// 302 <a href="/v2/orders/42">Found</a>.
	//
	// <nil>
}

// A KeyFunc that returns ErrNoLock serves the request without a
// transaction: here reads go through unlocked, and only changes take the
// order's lock.
func ExampleErrNoLock() {
	db, m := exampleDB()
	defer db.Close()
	mock.ExpectWithXactLock(m, exampleOrder42, mock.Commit, advisory.Try())

	byID := httplock.PathKey(exampleOrdersNS, "id")
	key := func(r *http.Request) (advisory.Key, error) {
		if r.Method == http.MethodGet {
			return advisory.Key{}, httplock.ErrNoLock
		}
		return byID(r)
	}
	order := func(w http.ResponseWriter, r *http.Request) {
		_, locked := advisory.TxFromContext(r.Context())
		fmt.Fprintf(w, "%s locked=%v\n", r.Method, locked)
	}
	mux := http.NewServeMux()
	mux.Handle("/orders/{id}", httplock.XactLock(db, key)(http.HandlerFunc(order)))

	show(mux, "GET", "/orders/42")
	show(mux, "PUT", "/orders/42")
	fmt.Println(m.ExpectationsWereMet())
	// Output:
	// 200 GET locked=false
	// 200 PUT locked=true
	// <nil>
}
