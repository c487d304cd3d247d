package main

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// hooks wraps pay so that the test can hold a request inside its handler,
// with the order's lock held, and can look at the database after a 200 has
// gone out but before its handler returned.
type hooks struct {
	// A request with ?pause sends on paused and waits for resume, before
	// pay runs.
	paused chan struct{}
	resume chan struct{}
	// After pay wrote a 200, the handler flushes the response and waits
	// for a receive on checked, which the client sends once it has read
	// the order's payments from another connection. Had the middleware
	// committed only when the handler returned, the client would not see
	// the payment.
	checked chan struct{}
}

func (h *hooks) wrap(pay http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if r.URL.Query().Has("pause") {
			h.paused <- struct{}{}
			select {
			case <-h.resume:
			case <-ctx.Done():
				return
			}
		}
		sw := &statusWriter{ResponseWriter: w}
		pay.ServeHTTP(sw, r)
		if sw.status != http.StatusOK || http.NewResponseController(w).Flush() != nil {
			return
		}
		select {
		case <-h.checked:
		case <-ctx.Done():
		}
	})
}

// statusWriter records the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// response is what the client got for one request.
type response struct {
	status     int
	retryAfter string
	body       string
}

func (r response) String() string {
	return fmt.Sprintf("%d %s (Retry-After %q): %q", r.status, http.StatusText(r.status), r.retryAfter, r.body)
}

// client plays requests against the server and checks each 200 against
// the database while its handler still runs.
type client struct {
	t        *testing.T
	ctx      context.Context
	base     string
	orders   *orders
	observer *sql.Conn // outside every request's transaction
	hooks    *hooks
}

// post sends POST path. For a 200 it reads the first line of the body,
// the payment count that the handler reported, and compares it with the
// count that the observer reads while the handler still waits on
// hooks.checked. It may run on another goroutine than the test's, so it
// reports with Errorf only.
func (c *client) post(path string) response {
	req, err := http.NewRequestWithContext(c.ctx, "POST", c.base+path, nil)
	if err != nil {
		c.t.Errorf("%s: %v", path, err)
		return response{}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Errorf("%s: %v", path, err)
		return response{}
	}
	defer res.Body.Close()
	r := response{status: res.StatusCode, retryAfter: res.Header.Get("Retry-After")}
	body := bufio.NewReader(res.Body)
	if res.StatusCode == http.StatusOK {
		line, err := body.ReadString('\n')
		r.body = line
		var id, n, got int
		if _, serr := fmt.Sscanf(line, "order %d: payment %d recorded", &id, &n); serr != nil {
			c.t.Errorf("%s: unexpected body %q (%v)", path, line, err)
		} else if err := c.observer.QueryRowContext(c.ctx, "SELECT payments FROM "+c.orders.table()+" WHERE id = $1", id).Scan(&got); err != nil {
			c.t.Errorf("%s: read payments: %v", path, err)
		} else if got != n {
			c.t.Errorf("%s: the client had payment %d while the database showed %d: the commit did not come first", path, n, got)
		}
		select {
		case c.hooks.checked <- struct{}{}:
		case <-c.ctx.Done():
		}
	}
	rest, err := io.ReadAll(body)
	if err != nil {
		c.t.Errorf("%s: read body: %v", path, err)
	}
	r.body += string(rest)
	return r
}

// TestOrders serves the program's routes on every server and driver and
// plays a client against them: one request per order at a time, 409 with
// Retry-After for a busy order, 400 for a malformed id, and every 200
// committed before it was sent. The subtests do not run in parallel, as
// those on one server share the orders' keys.
func TestOrders(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		orders, err := createOrders(ctx, tg.DB, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer orders.drop()
		observer, err := tg.DB.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer observer.Close()

		h := &hooks{paused: make(chan struct{}, 1), resume: make(chan struct{}), checked: make(chan struct{})}
		srv := httptest.NewServer(routes(tg.DB, h.wrap(http.HandlerFunc(orders.pay))))
		defer srv.Close()
		c := &client{t: t, ctx: ctx, base: srv.URL, orders: orders, observer: observer, hooks: h}

		check := func(label string, got response, status int, retryAfter, body string) {
			t.Helper()
			if got.status != status || got.retryAfter != retryAfter || strings.TrimSpace(got.body) != body {
				t.Errorf("%s: got %v; want %d (Retry-After %q): %q", label, got, status, retryAfter, body)
			}
		}

		// The first request takes order 42's lock and pauses in its
		// handler.
		first := make(chan response, 1)
		go func() { first <- c.post("/orders/42?pause") }()
		select {
		case <-h.paused:
		case r := <-first:
			close(h.resume)
			t.Fatalf("the first request ended before it paused: %v", r)
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
		check("second request for order 42", c.post("/orders/42"), http.StatusConflict, "1", "conflict: resource busy, retry later")
		check("request for order 43", c.post("/orders/43"), http.StatusOK, "", "order 43: payment 1 recorded")

		close(h.resume)
		select {
		case r := <-first:
			check("first request for order 42", r, http.StatusOK, "", "order 42: payment 1 recorded")
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
		check("order 42 again, now free", c.post("/orders/42"), http.StatusOK, "", "order 42: payment 2 recorded")
		check("malformed id", c.post("/orders/forty-two"), http.StatusBadRequest, "", "bad request: invalid resource key")

		for _, want := range []struct{ id, payments int }{{42, 2}, {43, 1}} {
			var n int
			if err := tg.DB.QueryRowContext(ctx, "SELECT payments FROM "+orders.table()+" WHERE id = $1", want.id).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != want.payments {
				t.Errorf("order %d has %d payments in the database, want %d", want.id, n, want.payments)
			}
		}
		srv.Close()
		observer.Close()
		if n := tg.DB.Stats().InUse; n != 0 {
			t.Errorf("%d connections still in use", n)
		}
	})
}

// TestProgram runs the program as main does, through DATABASE_URL, on
// every server and driver: it serves on a free port until its context
// ends.
func TestProgram(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Setenv("DATABASE_URL", tg.Server.DSN)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		pr, pw := io.Pipe()
		ran := make(chan error, 1)
		go func() {
			ran <- run(ctx, pw, tg.Driver, "127.0.0.1:0", 0)
			pw.Close()
		}()
		var out strings.Builder
		lines := bufio.NewScanner(pr)
		base := ""
		for base == "" && lines.Scan() {
			fmt.Fprintln(&out, lines.Text())
			if _, url, ok := strings.Cut(lines.Text(), " on http://"); ok {
				base, _, _ = strings.Cut(url, " ")
			}
		}
		go func() { _, _ = io.Copy(io.Discard, pr) }()
		if base == "" {
			t.Fatalf("the program did not say where it serves (run: %v):\n%s", <-ran, out.String())
		}
		if !strings.Contains(out.String(), "(DATABASE_URL)\n") {
			t.Errorf("the program did not name its database:\n%s", out.String())
		}

		res, err := http.Post("http://"+base+"/orders/42", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || string(body) != "order 42: payment 1 recorded\n" {
			t.Errorf("POST /orders/42 = %d %q; want 200 and payment 1", res.StatusCode, body)
		}

		cancel()
		if err := <-ran; err != nil {
			t.Errorf("run after its context ended: %v", err)
		}
	})
}
