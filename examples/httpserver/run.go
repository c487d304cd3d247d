package main

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// response is what the client got for one request.
type response struct {
	status     int
	retryAfter string
	body       string
	err        error
}

func (r response) String() string {
	if r.err != nil {
		return "error: " + r.err.Error()
	}
	s := fmt.Sprintf("%d %s", r.status, http.StatusText(r.status))
	if r.retryAfter != "" {
		s += " (Retry-After: " + r.retryAfter + ")"
	}
	return s + ": " + strings.TrimSpace(r.body)
}

// run serves the application on a local port, plays the client against it,
// writes each response to out, and checks the outcome in the database. It
// returns an error if any response or payment count differs from what
// the middleware promises. It stops the server and drops its tables
// before it returns.
func run(ctx context.Context, db *sql.DB, out io.Writer) error {
	st, err := newStore(ctx, db)
	if err != nil {
		return err
	}
	defer st.drop()

	// The observer reads the database from a connection of its own,
	// outside every request's transaction.
	observer, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer observer.Close()

	a := &app{store: st, paused: make(chan struct{}, 1), resume: make(chan struct{}), checked: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: a.handler(db), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	resumed := false
	defer func() {
		if !resumed {
			close(a.resume)
		}
		shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
		<-served
	}()
	base := "http://" + ln.Addr().String()
	fmt.Fprintf(out, "serving POST /orders/{id} on %s\n", base)

	client := &http.Client{Timeout: time.Minute}
	var (
		mu       sync.Mutex // guards problems, appended to by the first request's goroutine too
		problems []string
	)
	problem := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	post := func(path string) response {
		req, err := http.NewRequestWithContext(ctx, "POST", base+path, nil)
		if err != nil {
			return response{err: err}
		}
		res, err := client.Do(req)
		if err != nil {
			return response{err: err}
		}
		defer res.Body.Close()
		r := response{status: res.StatusCode, retryAfter: res.Header.Get("Retry-After")}
		var body io.Reader = res.Body
		if res.StatusCode == http.StatusOK {
			// The handler is still running: it waits on a.checked. Read
			// its line, and the payment count from another connection.
			br := bufio.NewReader(res.Body)
			body = br
			line, err := br.ReadString('\n')
			r.body = line
			var id, n int
			if _, serr := fmt.Sscanf(line, "order %d: payment %d recorded", &id, &n); serr != nil {
				problem("%s: unexpected body %q (%v)", path, line, err)
			} else if got, err := st.payments(ctx, observer, id); err != nil {
				problem("%s: read payments: %v", path, err)
			} else if got != n {
				problem("%s: the client had payment %d while the database showed %d: the commit did not come first", path, n, got)
			}
			select {
			case a.checked <- struct{}{}:
			case <-ctx.Done():
			}
		}
		b, err := io.ReadAll(body)
		r.body += string(b)
		r.err = err
		return r
	}

	check := func(label string, got response, want int) {
		fmt.Fprintf(out, "%-34s %v\n", label+":", got)
		if got.status != want {
			problem("%s: got %v, want %d", label, got, want)
		}
	}

	// The first request takes order 42's lock and pauses in its handler.
	first := make(chan response, 1)
	go func() { first <- post("/orders/42?pause") }()
	select {
	case <-a.paused:
	case r := <-first:
		return fmt.Errorf("the first request ended before it paused: %v", r)
	case <-ctx.Done():
		return ctx.Err()
	}
	fmt.Fprintln(out, "first request for order 42 is in its handler, holding the lock")

	check("second request for order 42", post("/orders/42"), http.StatusConflict)
	check("request for order 43", post("/orders/43"), http.StatusOK)

	close(a.resume)
	resumed = true
	var r1 response
	select {
	case r1 = <-first:
	case <-ctx.Done():
		return ctx.Err()
	}
	check("first request for order 42", r1, http.StatusOK)
	check("order 42 again, now free", post("/orders/42"), http.StatusOK)
	check("malformed id", post("/orders/forty-two"), http.StatusBadRequest)

	for _, want := range []struct{ id, payments int }{{42, 2}, {43, 1}} {
		n, err := st.payments(ctx, db, want.id)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "order %d has %d payment(s) in the database\n", want.id, n)
		if n != want.payments {
			problem("order %d: %d payments, want %d", want.id, n, want.payments)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		return errors.New("unexpected outcome:\n  " + strings.Join(problems, "\n  "))
	}
	fmt.Fprintln(out, "ok: one request per order at a time; every 200 was committed before it was sent",
		"(checked from another connection while its handler was still running)")
	return nil
}
