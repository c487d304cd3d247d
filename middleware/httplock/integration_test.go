package httplock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/gorilla/mux"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/httplock"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// safetyNet bounds every wait in the integration tests, so that a broken
// build fails instead of hanging. No test asserts on time.
const safetyNet = time.Minute

// A router serves h at /orders/{id} behind the middleware, the way an
// application on that router would.
type router struct {
	name  string
	route func(db *sql.DB, ns int32, opts []httplock.Option, h http.Handler) http.Handler
}

var routers = []router{
	{"ServeMux", func(db *sql.DB, ns int32, opts []httplock.Option, h http.Handler) http.Handler {
		m := http.NewServeMux()
		m.Handle("GET /orders/{id}", httplock.XactLock(db, httplock.PathKey(ns, "id"), opts...)(h))
		return m
	}},
	{"Chi", func(db *sql.DB, ns int32, opts []httplock.Option, h http.Handler) http.Handler {
		r := chi.NewRouter()
		r.With(httplock.XactLock(db, httplock.PathKey(ns, "id"), opts...)).Get("/orders/{id}", h.ServeHTTP)
		return r
	}},
	{"ChiRoute", func(db *sql.DB, ns int32, opts []httplock.Option, h http.Handler) http.Handler {
		r := chi.NewRouter()
		r.Route("/orders/{id}", func(r chi.Router) {
			r.Use(httplock.XactLock(db, httplock.PathKey(ns, "id"), opts...))
			r.Get("/", h.ServeHTTP)
		})
		return r
	}},
	{"GorillaMux", func(db *sql.DB, ns int32, opts []httplock.Option, h http.Handler) http.Handler {
		key := httplock.ValueKey(ns, func(r *http.Request) string { return mux.Vars(r)["id"] })
		r := mux.NewRouter()
		r.Handle("/orders/{id}", h).Methods("GET")
		r.Use(httplock.XactLock(db, key, opts...))
		return r
	}},
}

// orderApp is the application under the middleware. Query parameters steer
// it: tag=T inserts a row (id, T) through the request's transaction; block
// waits, after the insert, until the test releases it; seen puts the number
// of rows for the order visible to the transaction in X-Seen; status=N
// answers N; panic=V panics.
type orderApp struct {
	t       *testing.T
	table   string
	entered chan string  // the tag of a request that blocks
	entries atomic.Int32 // how many requests reached the handler
	release chan struct{}
	once    sync.Once
}

func newOrderApp(t *testing.T, db *sql.DB) *orderApp {
	t.Helper()
	a := &orderApp{
		t:       t,
		table:   fmt.Sprintf("mw_orders_%08x", uint32(advisory.HashText(t.Name()))),
		entered: make(chan string, 16),
		release: make(chan struct{}),
	}
	if _, err := db.Exec("CREATE TABLE " + a.table + " (order_id int NOT NULL, tag text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := db.Exec("DROP TABLE " + a.table); err != nil {
			t.Error(err)
		}
	})
	return a
}

// unblock releases every blocked request.
func (a *orderApp) unblock() { a.once.Do(func() { close(a.release) }) }

func (a *orderApp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.entries.Add(1)
	ctx := r.Context()
	tx, ok := advisory.TxFromContext(ctx)
	if !ok {
		a.t.Error("no transaction in the request context")
		http.Error(w, "no transaction", http.StatusInternalServerError)
		return
	}
	id, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/orders/"))
	if err != nil {
		a.t.Errorf("the handler ran for %s", r.URL.Path)
		return
	}
	q := r.URL.Query()
	if tag := q.Get("tag"); tag != "" {
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+a.table+" (order_id, tag) VALUES ($1, $2)", id, tag); err != nil {
			a.t.Errorf("insert: %v", err)
		}
	}
	if q.Has("block") {
		a.entered <- q.Get("tag")
		select {
		case <-a.release:
		case <-ctx.Done():
		}
	}
	if q.Has("seen") {
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM "+a.table+" WHERE order_id = $1", id).Scan(&n); err != nil {
			a.t.Errorf("count: %v", err)
		}
		w.Header().Set("X-Seen", strconv.Itoa(n))
	}
	switch v := q.Get("panic"); v {
	case "":
	case "abort":
		panic(http.ErrAbortHandler)
	default:
		panic("orderApp: " + v)
	}
	status := http.StatusOK
	if s := q.Get("status"); s != "" {
		status, _ = strconv.Atoi(s)
	}
	w.WriteHeader(status)
	io.WriteString(w, "done")
}

// rows counts the committed rows with tag.
func (a *orderApp) rows(t *testing.T, db *sql.DB, tag string) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM "+a.table+" WHERE tag = $1", tag).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// result is what a client got.
type result struct {
	status int
	header http.Header
	body   string
	err    error
}

var client = &http.Client{Timeout: safetyNet}

func fetch(url string) result { return fetchCtx(context.Background(), url) }

// fetchCtx fetches url under ctx, which can end the request.
func fetchCtx(ctx context.Context, url string) result {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return result{err: err}
	}
	res, err := client.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return result{status: res.StatusCode, header: res.Header, body: string(b), err: err}
}

// fetchAsync fetches url in a goroutine; the test must receive the result.
func fetchAsync(url string) <-chan result { return fetchAsyncCtx(context.Background(), url) }

// fetchAsyncCtx is fetchAsync under ctx.
func fetchAsyncCtx(ctx context.Context, url string) <-chan result {
	c := make(chan result, 1)
	go func() { c <- fetchCtx(ctx, url) }()
	return c
}

// serve starts a server for h, closed at cleanup, whose panic logs are
// discarded (the tests panic on purpose).
func serve(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// awaitBlocked waits until the request behind pending has entered its
// handler and blocks there with the lock held.
func awaitBlocked(t *testing.T, a *orderApp, pending <-chan result) {
	t.Helper()
	select {
	case <-a.entered:
	case r := <-pending:
		t.Fatalf("the first request ended before it blocked: %+v", r)
	case <-time.After(safetyNet):
		t.Fatal("the first request never reached its handler")
	}
}

// await receives a pending result.
func await(t *testing.T, pending <-chan result) result {
	t.Helper()
	select {
	case r := <-pending:
		return r
	case <-time.After(safetyNet):
		t.Fatal("no response")
		return result{}
	}
}

// testNamespace gives each test its own key namespace, so that tests
// sharing a server never share a lock.
func testNamespace(t *testing.T) int32 { return advisory.HashText(t.Name()) & 0x7fffffff }

func TestIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		for _, rt := range routers {
			t.Run(rt.name, func(t *testing.T) {
				t.Run("SameOrderOneConflict", func(t *testing.T) { testSameOrder(t, tg.DB, rt) })
				t.Run("OtherOrderServed", func(t *testing.T) { testOtherOrder(t, tg.DB, rt) })
				t.Run("WaitServesAfterCommit", func(t *testing.T) { testWait(t, tg.DB, rt) })
				t.Run("WritesFollowStatus", func(t *testing.T) { testVisibility(t, tg.DB, rt) })
				t.Run("BarrierOneServed", func(t *testing.T) { testBarrier(t, tg.DB, rt) })
				if n := tg.DB.Stats().InUse; n != 0 {
					t.Errorf("%d connections still in use", n)
				}
			})
		}
	})
}

// testSameOrder: two concurrent requests for /orders/42 give exactly one
// 200 and one 409, and only the first one's work is committed.
func testSameOrder(t *testing.T, db *sql.DB, rt router) {
	a := newOrderApp(t, db)
	srv := serve(t, rt.route(db, testNamespace(t), nil, a))
	t.Cleanup(a.unblock) // runs before srv.Close

	first := fetchAsync(srv.URL + "/orders/42?tag=first&block")
	awaitBlocked(t, a, first)
	second := fetch(srv.URL + "/orders/42?tag=second")
	a.unblock()
	r1 := await(t, first)

	if r1.err != nil || second.err != nil {
		t.Fatalf("errors: %v, %v", r1.err, second.err)
	}
	if r1.status != 200 || second.status != 409 {
		t.Fatalf("statuses %d and %d, want 200 and 409", r1.status, second.status)
	}
	if got := second.header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After %q, want 1", got)
	}
	if n := a.rows(t, db, "first"); n != 1 {
		t.Errorf("the served request left %d rows, want 1", n)
	}
	if n := a.rows(t, db, "second"); n != 0 {
		t.Errorf("the refused request left %d rows, want 0", n)
	}
}

// barrierSize is how many requests testBarrier releases at once.
const barrierSize = 8

// testBarrier: barrierSize requests for /orders/42, released at once, give
// exactly one 200 and barrierSize-1 409s. The one that gets the lock blocks
// in its handler until every other one has been answered, so none of them
// can slip in after it.
func testBarrier(t *testing.T, db *sql.DB, rt router) {
	a := newOrderApp(t, db)
	srv := serve(t, rt.route(db, testNamespace(t), nil, a))
	t.Cleanup(a.unblock)

	start := make(chan struct{})
	results := make(chan result, barrierSize)
	var wg sync.WaitGroup
	for i := range barrierSize {
		wg.Go(func() {
			<-start
			results <- fetch(fmt.Sprintf("%s/orders/42?tag=b%d&block", srv.URL, i))
		})
	}
	t.Cleanup(wg.Wait)
	close(start)

	conflicts := 0
	for range barrierSize - 1 {
		r := await(t, results)
		if r.status != http.StatusConflict {
			t.Fatalf("got %d (%v) %q while the lock was held, want 409", r.status, r.err, r.body)
		}
		conflicts++
	}
	a.unblock()
	if r := await(t, results); r.status != http.StatusOK {
		t.Fatalf("the lock holder got %d (%v), want 200", r.status, r.err)
	}
	if n := a.entries.Load(); n != 1 || conflicts != barrierSize-1 {
		t.Errorf("%d handlers ran and %d requests were refused; want 1 and %d", n, conflicts, barrierSize-1)
	}
	var committed int
	if err := db.QueryRow("SELECT count(*) FROM " + a.table).Scan(&committed); err != nil {
		t.Fatal(err)
	}
	if committed != 1 {
		t.Errorf("%d rows committed, want 1", committed)
	}
}

// testOtherOrder: /orders/43 is served while /orders/42 is held.
func testOtherOrder(t *testing.T, db *sql.DB, rt router) {
	a := newOrderApp(t, db)
	srv := serve(t, rt.route(db, testNamespace(t), nil, a))
	t.Cleanup(a.unblock)

	first := fetchAsync(srv.URL + "/orders/42?tag=o42&block")
	awaitBlocked(t, a, first)
	other := fetch(srv.URL + "/orders/43?tag=o43")
	a.unblock()
	r1 := await(t, first)
	if r1.status != 200 || other.status != 200 {
		t.Fatalf("statuses %d (%v) and %d (%v), want 200 and 200", r1.status, r1.err, other.status, other.err)
	}
	if a.rows(t, db, "o42") != 1 || a.rows(t, db, "o43") != 1 {
		t.Error("a served request's row is missing")
	}
}

// testWait: with Wait, the second request waits on the server for the
// lock, and its handler runs after the first request committed: it sees
// the first one's row.
func testWait(t *testing.T, db *sql.DB, rt router) {
	a := newOrderApp(t, db)
	ns := testNamespace(t)
	srv := serve(t, rt.route(db, ns, []httplock.Option{httplock.Wait(safetyNet)}, a))
	t.Cleanup(a.unblock)

	first := fetchAsync(srv.URL + "/orders/42?tag=first&block")
	awaitBlocked(t, a, first)
	second := fetchAsync(srv.URL + "/orders/42?tag=second&seen")
	pgtest.AwaitWaiting(t, db, advisory.PairKey(ns, 42))
	a.unblock()
	r1, r2 := await(t, first), await(t, second)
	if r1.status != 200 || r2.status != 200 {
		t.Fatalf("statuses %d (%v) and %d (%v), want 200 and 200", r1.status, r1.err, r2.status, r2.err)
	}
	// The second handler counted its own row and the first one's.
	if got := r2.header.Get("X-Seen"); got != "2" {
		t.Errorf("the waiting request saw %s rows for the order, want 2: the first request's commit came after it", got)
	}
}

// testVisibility: a handler's writes are visible once a 2xx arrives, and
// absent after a 4xx, a 5xx or a panic; the lock is free afterwards.
func testVisibility(t *testing.T, db *sql.DB, rt router) {
	a := newOrderApp(t, db)
	srv := serve(t, rt.route(db, testNamespace(t), nil, a))
	tests := []struct {
		query   string
		status  int // 0: the connection is dropped
		visible bool
	}{
		{"tag=ok", 200, true},
		{"tag=created&status=201", 201, true},
		{"tag=invalid&status=422", 422, false},
		{"tag=failed&status=500", 500, false},
		{"tag=panicked&panic=boom", 0, false},
		{"tag=aborted&panic=abort", 0, false},
		{"tag=after", 200, true},
	}
	for _, tt := range tests {
		r := fetch(srv.URL + "/orders/42?" + tt.query)
		switch {
		case tt.status == 0 && r.err == nil:
			t.Errorf("%s: got %d, want a dropped connection", tt.query, r.status)
		case tt.status != 0 && r.status != tt.status:
			t.Errorf("%s: got %d (%v), want %d", tt.query, r.status, r.err, tt.status)
		}
		// Read at once: a success must be durable by the time it arrives.
		tag := strings.TrimPrefix(strings.Split(tt.query, "&")[0], "tag=")
		if got := a.rows(t, db, tag) == 1; got != tt.visible {
			t.Errorf("%s: row visible: %v, want %v", tt.query, got, tt.visible)
		}
	}
}

// TestUnavailableDatabase checks, on both drivers, that a database that
// cannot be reached is answered 503 without a driver message.
func TestUnavailableDatabase(t *testing.T) {
	t.Parallel()
	closed := &pgtest.Server{Name: "closed", DSN: "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=5"}
	for _, driver := range pgtest.Drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			db, err := closed.OpenDB(driver)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var got error
			mw := httplock.XactLock(db, httplock.PathKey(1, "id"), httplock.ErrorHandler(
				func(w http.ResponseWriter, r *http.Request, err error) {
					got = err
					http.Error(w, "service unavailable", http.StatusServiceUnavailable)
				}))
			rec := httptest.NewRecorder()
			ordersMux(mw, http.NotFoundHandler()).ServeHTTP(rec,
				httptest.NewRequest("GET", "/orders/1", nil).WithContext(context.Background()))
			if !errors.Is(got, httplock.ErrUnavailable) {
				t.Errorf("error %v is not classified as unavailable", got)
			}
			// And with the default error handler:
			rec = httptest.NewRecorder()
			ordersMux(httplock.XactLock(db, httplock.PathKey(1, "id")), http.NotFoundHandler()).
				ServeHTTP(rec, httptest.NewRequest("GET", "/orders/1", nil))
			if rec.Code != 503 || rec.Body.String() != "service unavailable\n" {
				t.Errorf("got %d %q, want 503", rec.Code, rec.Body)
			}
		})
	}
}
