package httplock_test

import (
	"context"
	crand "crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/httplock"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// idemApp is a payments service behind Idempotent: POST /payments/{id}
// inserts a payment row in the request's transaction and answers 201 with
// the number of the delivery that made it. A request with the header
// X-Lose-Response stands for a crash between the commit and the response:
// the connection is dropped after the middleware has committed and
// written, so the client never sees the answer.
type idemApp struct {
	records, payments string
	calls             atomic.Int64
}

func newIdemApp(t *testing.T, db *sql.DB) *idemApp {
	t.Helper()
	a := &idemApp{records: idemTable(t, db, "idem_http"), payments: idemTable(t, db, "idem_payments")}
	if _, err := db.Exec("CREATE TABLE " + a.payments + " (id text NOT NULL, delivery text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	return a
}

// idemTable returns a table name of its own, dropped at t's cleanup.
func idemTable(t *testing.T, db *sql.DB, prefix string) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = crand.Read(b)
	name := prefix + "_" + hex.EncodeToString(b)
	t.Cleanup(func() { _, _ = db.Exec("DROP TABLE IF EXISTS " + name) })
	return name
}

func (a *idemApp) handler(db *sql.DB, opts ...httplock.IdempotentOption) http.Handler {
	mux := http.NewServeMux()
	pay := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.calls.Add(1)
		tx, ok := advisory.TxFromContext(r.Context())
		if !ok || tx == nil {
			http.Error(w, "no transaction", http.StatusInternalServerError)
			return
		}
		if r.URL.Query().Get("fail") != "" {
			_, _ = tx.ExecContext(r.Context(), "INSERT INTO "+a.payments+" (id, delivery) VALUES ($1, 'failed')", r.PathValue("id"))
			http.Error(w, "card declined", http.StatusPaymentRequired)
			return
		}
		delivery := r.Header.Get("X-Delivery")
		if _, err := tx.ExecContext(r.Context(), "INSERT INTO "+a.payments+" (id, delivery) VALUES ($1, $2)", r.PathValue("id"), delivery); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/payments/"+r.PathValue("id"))
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%q,"delivery":%q}`, r.PathValue("id"), delivery)
	})
	opts = append([]httplock.IdempotentOption{httplock.IdempotencyTable(a.records), a.scope()}, opts...)
	mux.Handle("POST /payments/{id}", httplock.Idempotent(db, opts...)(pay))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Lose-Response") == "" {
			mux.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(discard{}, r)
		panic(http.ErrAbortHandler) // the connection dies; the client gets no response
	})
}

// discard is a ResponseWriter that loses everything.
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}

// count returns the payment rows of id.
func (a *idemApp) count(t *testing.T, db *sql.DB, id string) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM "+a.payments+" WHERE id = $1", id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

type idemResp struct {
	status   int
	body     string
	ctype    string
	location string
	replayed bool
	retry    string
}

// scope gives the app's keys a scope of their own: the lock depends on the
// key alone, and the drivers' subtests run at once on one server.
func (a *idemApp) scope() httplock.IdempotentOption {
	return httplock.IdempotencyScope(func(*http.Request) (string, error) { return a.records, nil })
}

// post sends a payment request with an Idempotency-Key.
func post(ctx context.Context, c *http.Client, url, key string, header ...string) (idemResp, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", url, nil)
	if err != nil {
		return idemResp{}, err
	}
	if key != "" {
		req.Header.Set(httplock.IdempotencyKeyHeader, key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return idemResp{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return idemResp{
		status: resp.StatusCode, body: string(b), ctype: resp.Header.Get("Content-Type"),
		location: resp.Header.Get("Location"), replayed: resp.Header.Get(httplock.ReplayedHeader) == "true",
		retry: resp.Header.Get("Retry-After"),
	}, err
}

// idemScale multiplies the operation count of the exactly-once proof:
// PGADVISORY_IDEMPOTENCY_SCALE=10 sends 10,000 requests for 1,000
// payments.
func idemScale(t *testing.T) int {
	v := os.Getenv("PGADVISORY_IDEMPOTENCY_SCALE")
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("PGADVISORY_IDEMPOTENCY_SCALE=%q: want a positive integer", v)
	}
	return n
}

// TestIdempotentExactlyOnceIntegration sends 10 requests for each of 100
// payments, 1,000 in a random order from 16 clients at once; a client
// that gets 409 retries until it gets an answer. Then every payment is
// replayed once more. Each payment is inserted exactly once by the
// database's count, and every request of a payment gets the same 201 and
// body, the one the delivery that ran produced.
func TestIdempotentExactlyOnceIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ops, dups, clients := 100*idemScale(t), 10, 16
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		tg.DB.SetMaxOpenConns(clients)
		app := newIdemApp(t, tg.DB)
		srv := httptest.NewServer(app.handler(tg.DB))
		defer srv.Close()
		c := srv.Client()
		c.Transport.(*http.Transport).MaxIdleConnsPerHost = clients

		deliveries := make([]int, 0, ops*dups)
		for op := range ops {
			for range dups {
				deliveries = append(deliveries, op)
			}
		}
		rand.Shuffle(len(deliveries), func(i, j int) { deliveries[i], deliveries[j] = deliveries[j], deliveries[i] })

		bodies := make([]string, len(deliveries))
		var next, conflicts, replayed atomic.Int64
		errs := make(chan error, clients)
		var wg sync.WaitGroup
		start := time.Now()
		for range clients {
			wg.Go(func() {
				for {
					i := int(next.Add(1)) - 1
					if i >= len(deliveries) {
						return
					}
					id := strconv.Itoa(deliveries[i])
					for {
						r, err := post(ctx, c, srv.URL+"/payments/"+id, "pay-"+id, "X-Delivery", strconv.Itoa(i))
						if err != nil {
							errs <- err
							return
						}
						if r.status == http.StatusConflict && r.retry == "1" {
							conflicts.Add(1)
							time.Sleep(2 * time.Millisecond)
							continue
						}
						if r.status != http.StatusCreated || r.ctype != "application/json" || r.location != "/payments/"+id {
							errs <- fmt.Errorf("delivery %d of payment %s: %+v", i, id, r)
							return
						}
						if r.replayed {
							replayed.Add(1)
						}
						bodies[i] = r.body
						break
					}
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		t.Logf("%d requests for %d payments from %d clients in %v: handler ran %d times, %d replayed, %d answered 409 and retried",
			len(deliveries), ops, clients, elapsed.Round(time.Millisecond), app.calls.Load(), replayed.Load(), conflicts.Load())

		first := make(map[int]string)
		for i, op := range deliveries {
			if b, ok := first[op]; ok && b != bodies[i] {
				t.Fatalf("payment %d answered %q and %q", op, b, bodies[i])
			}
			first[op] = bodies[i]
		}
		for op := range ops {
			id := strconv.Itoa(op)
			r, err := post(ctx, c, srv.URL+"/payments/"+id, "pay-"+id, "X-Delivery", "replay")
			if err != nil || r.status != http.StatusCreated || !r.replayed || r.body != first[op] {
				t.Fatalf("replay of payment %s: %+v, %v; want the first answer %q, replayed", id, r, err, first[op])
			}
		}
		var rows, distinct int
		if err := tg.DB.QueryRow("SELECT count(*), count(DISTINCT id) FROM "+app.payments).Scan(&rows, &distinct); err != nil {
			t.Fatal(err)
		}
		if rows != ops || distinct != ops || app.calls.Load() != int64(ops) {
			t.Errorf("%d payment rows for %d payments, handler ran %d times; want %d each", rows, distinct, app.calls.Load(), ops)
		}
	})
}

// TestIdempotentLostResponseIntegration: the first request's work
// commits, then its connection dies before the response reaches the
// client. The client's retry gets the stored status, headers and body,
// and the payment is made once.
func TestIdempotentLostResponseIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), safetyNet)
		defer cancel()
		app := newIdemApp(t, tg.DB)
		srv := httptest.NewServer(app.handler(tg.DB))
		defer srv.Close()
		c := srv.Client()

		if r, err := post(ctx, c, srv.URL+"/payments/7", "k7", "X-Delivery", "first", "X-Lose-Response", "1"); err == nil {
			t.Fatalf("the lost response arrived: %+v", r)
		}
		r, err := post(ctx, c, srv.URL+"/payments/7", "k7", "X-Delivery", "retry")
		if err != nil {
			t.Fatal(err)
		}
		want := idemResp{status: 201, body: `{"id":"7","delivery":"first"}`, ctype: "application/json", location: "/payments/7", replayed: true}
		if r != want {
			t.Errorf("retry got %+v, want %+v", r, want)
		}
		if n := app.count(t, tg.DB, "7"); n != 1 || app.calls.Load() != 1 {
			t.Errorf("%d payments after %d handler calls, want 1 and 1", n, app.calls.Load())
		}
	})
}

// TestIdempotentCasesIntegration covers the other paths: no key, a
// failure status, a reused key on another path, a concurrent duplicate,
// a bad key and a body over the limit.
func TestIdempotentCasesIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), safetyNet)
		defer cancel()
		app := newIdemApp(t, tg.DB)
		srv := httptest.NewServer(app.handler(tg.DB))
		defer srv.Close()
		c := srv.Client()

		t.Run("NoKey", func(t *testing.T) {
			// Served without a transaction: the handler finds none.
			r, err := post(ctx, c, srv.URL+"/payments/1", "")
			if err != nil || r.status != http.StatusInternalServerError || r.body != "no transaction\n" {
				t.Fatalf("got %+v, %v; want the handler's answer without a transaction", r, err)
			}
		})
		t.Run("FailureIsNotRecorded", func(t *testing.T) {
			r, err := post(ctx, c, srv.URL+"/payments/2?fail=1", "k2")
			if err != nil || r.status != http.StatusPaymentRequired || r.replayed {
				t.Fatalf("got %+v, %v; want the handler's 402", r, err)
			}
			r, err = post(ctx, c, srv.URL+"/payments/2", "k2", "X-Delivery", "second")
			if err != nil || r.status != http.StatusCreated || r.replayed {
				t.Fatalf("retry got %+v, %v; want a fresh 201", r, err)
			}
			if n := app.count(t, tg.DB, "2"); n != 1 {
				t.Errorf("%d rows for payment 2, want 1: the failed run's insert must roll back", n)
			}
		})
		t.Run("ReusedKeyOnAnotherPath", func(t *testing.T) {
			r, err := post(ctx, c, srv.URL+"/payments/3", "k2")
			if err != nil || r.status != http.StatusUnprocessableEntity {
				t.Fatalf("got %+v, %v; want 422", r, err)
			}
		})
		t.Run("BadKey", func(t *testing.T) {
			h := httplock.Idempotent(tg.DB, httplock.IdempotencyTable(app.records), app.scope())(http.NotFoundHandler())
			for _, key := range []string{"k\x7f", strings.Repeat("k", httplock.MaxIdempotencyKeyLen+1)} {
				rec := httptest.NewRecorder()
				req := httptest.NewRequest("POST", "/payments/4", nil)
				req.Header.Set(httplock.IdempotencyKeyHeader, key)
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusBadRequest {
					t.Errorf("key %.10q: got %d, want 400", key, rec.Code)
				}
			}
		})
		t.Run("ConcurrentDuplicate", func(t *testing.T) {
			// The key is the test's own: the lock of a key is one per
			// server and namespace, whatever the table, and the
			// subtests of other drivers run at once on the same server.
			entered, release := make(chan struct{}), make(chan struct{})
			slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				close(entered)
				<-release
				w.WriteHeader(http.StatusNoContent)
			})
			h := httplock.Idempotent(tg.DB, httplock.IdempotencyTable(app.records), app.scope())(slow)
			done := make(chan int)
			go func() {
				rec := httptest.NewRecorder()
				req := httptest.NewRequest("POST", "/slow", nil)
				req.Header.Set(httplock.IdempotencyKeyHeader, "slow-"+app.records)
				h.ServeHTTP(rec, req)
				done <- rec.Code
			}()
			select {
			case <-entered:
			case <-time.After(safetyNet):
				t.Fatal("the first request never reached the handler")
			}
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("POST", "/slow", nil)
			req.Header.Set(httplock.IdempotencyKeyHeader, "slow-"+app.records)
			h.ServeHTTP(rec, req)
			close(release)
			if rec.Code != http.StatusConflict || rec.Header().Get("Retry-After") != "1" {
				t.Errorf("duplicate got %d, Retry-After %q; want 409 with Retry-After 1", rec.Code, rec.Header().Get("Retry-After"))
			}
			if code := <-done; code != http.StatusNoContent {
				t.Errorf("first got %d, want 204", code)
			}
		})
		t.Run("BodyOverTheLimit", func(t *testing.T) {
			big := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tx, _ := advisory.TxFromContext(r.Context())
				_, _ = tx.ExecContext(r.Context(), "INSERT INTO "+app.payments+" (id, delivery) VALUES ('big', 'x')")
				_, err := w.Write(make([]byte, 2048))
				if !errors.Is(err, httplock.ErrResponseTooLarge) {
					t.Errorf("Write = %v, want ErrResponseTooLarge", err)
				}
			})
			h := httplock.Idempotent(tg.DB, httplock.IdempotencyTable(app.records), app.scope(), httplock.MaxResponseBytes(1024))(big)
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("POST", "/big", nil)
			req.Header.Set(httplock.IdempotencyKeyHeader, "big")
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusInternalServerError || app.count(t, tg.DB, "big") != 0 {
				t.Errorf("got %d with %d rows; want 500 and the work rolled back", rec.Code, app.count(t, tg.DB, "big"))
			}
		})
	})
}
