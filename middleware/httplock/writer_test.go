package httplock_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/httplock"
	"github.com/pgadvisory/pgadvisory/mock"
)

// TestFlushCommitsFirst checks that a flush ends the transaction before the
// flush reaches the client, through http.ResponseController and through
// http.Flusher alike.
func TestFlushCommitsFirst(t *testing.T) {
	t.Parallel()
	flushes := map[string]func(w http.ResponseWriter) error{
		"ResponseController": func(w http.ResponseWriter) error { return http.NewResponseController(w).Flush() },
		"Flusher":            func(w http.ResponseWriter) error { w.(http.Flusher).Flush(); return nil },
	}
	for name, flush := range flushes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db, m := mock.New(t, exact)
			expectLocked(m)
			m.ExpectCommit()
			spy := newSpy(m)
			ordersMux(lock(db), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if err := flush(w); err != nil {
					t.Errorf("flush: %v", err)
				}
				io.WriteString(w, "streamed")
			})).ServeHTTP(spy, httptest.NewRequest("GET", "/orders/42", nil))
			if !spy.Flushed || spy.Code != 200 || spy.Body.String() != "streamed" {
				t.Errorf("flushed %v, status %d, body %q", spy.Flushed, spy.Code, spy.Body)
			}
			if spy.atWrite != nil {
				t.Errorf("flushed before the commit: %v", spy.atWrite)
			}
		})
	}
}

// TestFlushCommitFails checks that a flush whose commit fails sends 500
// and reports the failure to the handler.
func TestFlushCommitFails(t *testing.T) {
	t.Parallel()
	db, m := mock.New(t, exact)
	expectLocked(m)
	m.ExpectCommit().WillReturnError(errSecret)
	spy := newSpy(m)
	ordersMux(lock(db), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).Flush(); !errors.Is(err, httplock.ErrCommit) {
			t.Errorf("flush returned %v, want ErrCommit", err)
		}
		io.WriteString(w, "streamed")
	})).ServeHTTP(spy, httptest.NewRequest("GET", "/orders/42", nil))
	if spy.Code != 500 || spy.Body.String() != "internal server error\n" || spy.Flushed {
		t.Errorf("status %d, body %q, flushed %v", spy.Code, spy.Body, spy.Flushed)
	}
}

// TestResponseControllerThroughUnwrap checks, on a real server, that the
// features http.ResponseController reaches through Unwrap still work, and
// that informational responses keep the commit-first rule.
func TestResponseControllerThroughUnwrap(t *testing.T) {
	t.Parallel()
	t.Run("Deadlines", func(t *testing.T) {
		t.Parallel()
		db, m := mock.New(t, exact)
		expectLocked(m)
		m.ExpectCommit()
		srv := httptest.NewServer(ordersMux(lock(db), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rc := http.NewResponseController(w)
			for name, err := range map[string]error{
				"SetReadDeadline":  rc.SetReadDeadline(time.Now().Add(time.Minute)),
				"SetWriteDeadline": rc.SetWriteDeadline(time.Now().Add(time.Minute)),
				"EnableFullDuplex": rc.EnableFullDuplex(),
			} {
				if err != nil {
					t.Errorf("%s: %v", name, err)
				}
			}
			io.WriteString(w, "ok")
		})))
		defer srv.Close()
		if got := get(t, srv.URL+"/orders/42"); got != "200 ok" {
			t.Errorf("got %q", got)
		}
	})
	t.Run("Informational", func(t *testing.T) {
		t.Parallel()
		db, m := mock.New(t, exact)
		expectLocked(m)
		m.ExpectCommit()
		srv := httptest.NewServer(ordersMux(lock(db), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Link", "</style.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			if m.ExpectationsWereMet() == nil {
				t.Error("103 Early Hints ended the transaction")
			}
			io.WriteString(w, "ok")
			if err := m.ExpectationsWereMet(); err != nil {
				t.Errorf("the body went out before the commit: %v", err)
			}
		})))
		defer srv.Close()
		if got := get(t, srv.URL+"/orders/42"); got != "200 ok" {
			t.Errorf("got %q", got)
		}
	})
}

// TestHijack checks that Hijack commits before it hands over the
// connection, refuses without ending the transaction when nothing
// underneath can hijack, and hijacks nothing when the commit fails.
func TestHijack(t *testing.T) {
	t.Parallel()
	t.Run("CommitsFirst", func(t *testing.T) {
		t.Parallel()
		db, m := mock.New(t, exact)
		expectLocked(m)
		m.ExpectCommit()
		srv := httptest.NewServer(ordersMux(lock(db), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			defer conn.Close()
			if err := m.ExpectationsWereMet(); err != nil {
				t.Errorf("hijacked before the commit: %v", err)
			}
			buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nhijacked")
			buf.Flush()
		})))
		defer srv.Close()
		if got := get(t, srv.URL+"/orders/42"); got != "200 hijacked" {
			t.Errorf("got %q", got)
		}
	})
	t.Run("NotSupported", func(t *testing.T) {
		t.Parallel()
		db, m := mock.New(t, exact)
		expectLocked(m)
		m.ExpectExec("UPDATE orders SET paid = true WHERE id = 42").WillReturnResult(affected(1))
		m.ExpectCommit()
		spy := newSpy(m) // a ResponseRecorder: it cannot hijack
		ordersMux(lock(db), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, _, err := http.NewResponseController(w).Hijack(); !errors.Is(err, http.ErrNotSupported) {
				t.Errorf("hijack returned %v, want http.ErrNotSupported", err)
			}
			// The transaction is still open: the handler can go on.
			tx, _ := advisory.TxFromContext(r.Context())
			if _, err := tx.ExecContext(r.Context(), "UPDATE orders SET paid = true WHERE id = 42"); err != nil {
				t.Errorf("the transaction ended at a refused hijack: %v", err)
			}
			io.WriteString(w, "served")
		})).ServeHTTP(spy, httptest.NewRequest("POST", "/orders/42", nil))
		if spy.Code != 200 || spy.Body.String() != "served" || spy.atWrite != nil {
			t.Errorf("got %d %q; expectations at the first write: %v", spy.Code, spy.Body, spy.atWrite)
		}
	})
	t.Run("CommitFails", func(t *testing.T) {
		t.Parallel()
		db, m := mock.New(t, exact)
		expectLocked(m)
		m.ExpectCommit().WillReturnError(errSecret)
		srv := httptest.NewServer(ordersMux(lock(db), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
				t.Error("hijacked although the commit failed")
				return
			}
			if !errors.Is(err, httplock.ErrCommit) {
				t.Errorf("hijack returned %v, want ErrCommit", err)
			}
		})))
		defer srv.Close()
		if got := get(t, srv.URL+"/orders/42"); got != "500 internal server error\n" {
			t.Errorf("got %q, want the 500 sent instead", got)
		}
	})
}

// get fetches url and returns "status body".
func get(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.Status[:3] + " " + string(b)
}
