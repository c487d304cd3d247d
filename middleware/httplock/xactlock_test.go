package httplock_test

import (
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/httplock"
	"github.com/pgadvisory/pgadvisory/mock"
)

func TestXactLockOutcomes(t *testing.T) {
	t.Parallel()
	ok := func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }
	status := func(code int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "handler says "+http.StatusText(code), code)
		}
	}
	busy := func(m sqlmock.Sqlmock) { mock.ExpectWithXactLock(m, order42, mock.XactNotAcquired, advisory.Try()) }
	tests := []struct {
		name       string
		path       string
		opts       []httplock.Option
		expect     func(m sqlmock.Sqlmock)
		handler    http.HandlerFunc
		wantStatus int
		wantBody   string
		emptyBody  bool // the body must be empty
		wantHeader http.Header
		wantCalled bool
	}{
		{
			name: "CommitOnOK", path: "/orders/42", handler: ok,
			expect:     func(m sqlmock.Sqlmock) { expectLocked(m); m.ExpectCommit() },
			wantStatus: 200, wantBody: "ok", wantCalled: true,
		},
		{
			name: "CommitOnCreated", path: "/orders/42", handler: status(201),
			expect:     func(m sqlmock.Sqlmock) { expectLocked(m); m.ExpectCommit() },
			wantStatus: 201, wantBody: "handler says Created\n", wantCalled: true,
		},
		{
			name: "CommitOnRedirect", path: "/orders/42",
			handler:    func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/orders", http.StatusSeeOther) },
			expect:     func(m sqlmock.Sqlmock) { expectLocked(m); m.ExpectCommit() },
			wantStatus: 303, wantHeader: http.Header{"Location": {"/orders"}}, wantCalled: true,
		},
		{
			name: "CommitWhenNothingWritten", path: "/orders/42",
			handler:    func(w http.ResponseWriter, r *http.Request) {},
			expect:     func(m sqlmock.Sqlmock) { expectLocked(m); m.ExpectCommit() },
			wantStatus: 200, wantCalled: true,
		},
		{
			name: "RollbackOnClientError", path: "/orders/42", handler: status(422),
			expect:     func(m sqlmock.Sqlmock) { expectLocked(m); m.ExpectRollback() },
			wantStatus: 422, wantBody: "handler says Unprocessable Entity\n", wantCalled: true,
		},
		{
			name: "RollbackOnServerError", path: "/orders/42", handler: status(500),
			expect:     func(m sqlmock.Sqlmock) { expectLocked(m); m.ExpectRollback() },
			wantStatus: 500, wantBody: "handler says Internal Server Error\n", wantCalled: true,
		},
		{
			name: "NotAcquired", path: "/orders/42", handler: ok, expect: busy,
			wantStatus: 409, wantBody: "conflict: resource busy, retry later\n",
			wantHeader: http.Header{"Retry-After": {"1"}},
		},
		{
			name: "BadKeyNoDatabase", path: "/orders/abc", handler: ok, expect: func(sqlmock.Sqlmock) {},
			wantStatus: 400, wantBody: "bad request: invalid resource key\n",
		},
		{
			name: "OutOfRangeNoDatabase", path: "/orders/2147483648", handler: ok, expect: func(sqlmock.Sqlmock) {},
			wantStatus: 400, wantBody: "bad request: invalid resource key\n",
		},
		{
			name: "BeginNetworkError", path: "/orders/42", handler: ok,
			expect: func(m sqlmock.Sqlmock) {
				m.ExpectBegin().WillReturnError(&net.OpError{Op: "dial", Net: "tcp", Err: errSecret})
			},
			wantStatus: 503, wantBody: "service unavailable\n",
		},
		{
			name: "BeginConnectionException", path: "/orders/42", handler: ok,
			expect:     func(m sqlmock.Sqlmock) { m.ExpectBegin().WillReturnError(mock.ServerError("08006")) },
			wantStatus: 503, wantBody: "service unavailable\n",
		},
		{
			name: "BeginTooManyConnections", path: "/orders/42", handler: ok,
			expect:     func(m sqlmock.Sqlmock) { m.ExpectBegin().WillReturnError(mock.ServerError("53300")) },
			wantStatus: 503, wantBody: "service unavailable\n",
		},
		{
			name: "LockAdminShutdown", path: "/orders/42", handler: ok,
			expect: func(m sqlmock.Sqlmock) {
				mock.ExpectWithXactLock(m, order42, mock.XactFailed, advisory.Try()).Lock.WillReturnError(mock.ServerError("57P01"))
			},
			wantStatus: 503, wantBody: "service unavailable\n",
		},
		{
			name: "LockOtherError", path: "/orders/42", handler: ok,
			expect: func(m sqlmock.Sqlmock) {
				mock.ExpectWithXactLock(m, order42, mock.XactFailed, advisory.Try()).Lock.WillReturnError(errSecret)
			},
			wantStatus: 500, wantBody: "internal server error\n",
		},
		{
			name: "CommitFails", path: "/orders/42",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Order", "42")
				w.WriteHeader(http.StatusCreated)
				if _, err := io.WriteString(w, "created"); !errors.Is(err, httplock.ErrCommit) {
					panic(fmt.Sprintf("a write after a failed commit returned %v", err))
				}
				w.Header().Set("X-Late", "1")
			},
			expect: func(m sqlmock.Sqlmock) {
				expectLocked(m)
				m.ExpectCommit().WillReturnError(errSecret)
			},
			wantStatus: 500, wantBody: "internal server error\n",
			wantHeader: http.Header{"X-Order": nil, "X-Late": nil, "X-Outer": {"kept"}},
			wantCalled: true,
		},
		{
			name: "CommitPolicy2xxOnly", path: "/orders/42",
			opts: []httplock.Option{httplock.CommitPolicy(func(s int) bool { return s >= 200 && s < 300 })},
			handler: func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "/elsewhere", http.StatusFound)
			},
			expect:     func(m sqlmock.Sqlmock) { expectLocked(m); m.ExpectRollback() },
			wantStatus: 302, wantCalled: true,
		},
		{
			name: "WaitGranted", path: "/orders/42", handler: ok,
			opts: []httplock.Option{httplock.Wait(2 * time.Second)},
			expect: func(m sqlmock.Sqlmock) {
				mock.ExpectWithXactLock(m, order42, mock.Commit, advisory.Wait(2*time.Second))
			},
			wantStatus: 200, wantBody: "ok", wantCalled: true,
		},
		{
			name: "WaitExpires", path: "/orders/42", handler: ok,
			opts: []httplock.Option{httplock.Wait(1500 * time.Millisecond)},
			expect: func(m sqlmock.Sqlmock) {
				mock.ExpectWithXactLock(m, order42, mock.XactFailed, advisory.Wait(1500*time.Millisecond)) // 55P03
			},
			wantStatus: 409, wantBody: "conflict: resource busy, retry later\n",
			wantHeader: http.Header{"Retry-After": {"1"}},
		},
		{
			name: "RetryAfterRoundsUp", path: "/orders/42", handler: ok, expect: busy,
			opts:       []httplock.Option{httplock.RetryAfter(2500 * time.Millisecond)},
			wantStatus: 409, wantHeader: http.Header{"Retry-After": {"3"}},
		},
		{
			name: "RetryAfterZero", path: "/orders/42", handler: ok, expect: busy,
			opts:       []httplock.Option{httplock.RetryAfter(0)},
			wantStatus: 409, wantHeader: http.Header{"Retry-After": nil},
		},
		{
			name: "ErrorResponseOverrides", path: "/orders/42", handler: ok, expect: busy,
			opts: []httplock.Option{
				httplock.ErrorResponse(advisory.ErrNotAcquired, http.StatusConflict, "first"),
				httplock.ErrorResponse(advisory.ErrNotAcquired, http.StatusLocked, "order is being changed"),
			},
			wantStatus: 423, wantBody: "order is being changed\n",
			wantHeader: http.Header{"Retry-After": {"1"}},
		},
		{
			name: "ErrorResponseCatchAll", path: "/orders/42", handler: ok,
			opts: []httplock.Option{httplock.ErrorResponse(nil, http.StatusBadGateway, "upstream trouble")},
			expect: func(m sqlmock.Sqlmock) {
				mock.ExpectWithXactLock(m, order42, mock.XactFailed, advisory.Try()).Lock.WillReturnError(errSecret)
			},
			wantStatus: 502, wantBody: "upstream trouble\n",
		},
		{
			name: "ErrorResponseEmptyBody", path: "/orders/42", handler: ok, expect: busy,
			opts:       []httplock.Option{httplock.ErrorResponse(advisory.ErrNotAcquired, http.StatusTooManyRequests, "")},
			wantStatus: 429, emptyBody: true, wantHeader: http.Header{"Content-Type": nil},
		},
		{
			name: "ErrorResponseCatchAllKeepsDefaults", path: "/orders/x", handler: ok, expect: func(sqlmock.Sqlmock) {},
			opts:       []httplock.Option{httplock.ErrorResponse(nil, http.StatusBadGateway, "upstream trouble")},
			wantStatus: 400, wantBody: "bad request: invalid resource key\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, m := mock.New(t, exact)
			tt.expect(m)
			called := false
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				called = true
				if _, ok := advisory.TxFromContext(r.Context()); !ok {
					t.Error("the handler's context has no transaction")
				}
				tt.handler(w, r)
			})
			mux := ordersMux(lock(db, tt.opts...), h)
			spy := newSpy(m)
			spy.Header().Set("X-Outer", "kept") // set by a middleware further out
			mux.ServeHTTP(spy, httptest.NewRequest("POST", tt.path, nil))

			res := spy.Result()
			if res.StatusCode != tt.wantStatus {
				t.Errorf("status %d, want %d", res.StatusCode, tt.wantStatus)
			}
			body := spy.Body.String()
			if (tt.wantBody != "" || tt.emptyBody) && body != tt.wantBody {
				t.Errorf("body %q, want %q", body, tt.wantBody)
			}
			if strings.Contains(body, "secret") || strings.Contains(body, "SELECT") || strings.Contains(body, "SQLSTATE") {
				t.Errorf("body %q leaks a driver message", body)
			}
			for k, v := range tt.wantHeader {
				if got := res.Header.Values(k); strings.Join(got, ",") != strings.Join(v, ",") {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			if called != tt.wantCalled {
				t.Errorf("handler called: %v, want %v", called, tt.wantCalled)
			}
			if spy.atWrite != nil {
				t.Errorf("the response began before the transaction ended: %v", spy.atWrite)
			}
		})
	}
}

// TestXactLockErrorHandler checks that a custom handler gets every
// failure, classified.
func TestXactLockErrorHandler(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		path   string
		expect func(m sqlmock.Sqlmock)
		want   error
	}{
		{"BadKey", "/orders/-", func(sqlmock.Sqlmock) {}, httplock.ErrBadKey},
		{"NotAcquired", "/orders/42", func(m sqlmock.Sqlmock) {
			mock.ExpectWithXactLock(m, order42, mock.XactNotAcquired, advisory.Try())
		}, advisory.ErrNotAcquired},
		{"Unavailable", "/orders/42", func(m sqlmock.Sqlmock) {
			m.ExpectBegin().WillReturnError(sql.ErrConnDone)
		}, httplock.ErrUnavailable},
		{"Commit", "/orders/42", func(m sqlmock.Sqlmock) {
			expectLocked(m)
			m.ExpectCommit().WillReturnError(errSecret)
		}, httplock.ErrCommit},
		{"Other", "/orders/42", func(m sqlmock.Sqlmock) {
			mock.ExpectWithXactLock(m, order42, mock.XactFailed, advisory.Try()).Lock.WillReturnError(errSecret)
		}, errSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, m := mock.New(t, exact)
			tt.expect(m)
			var got error
			mw := lock(db, httplock.ErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
				if _, ok := advisory.TxFromContext(r.Context()); ok {
					t.Error("the error handler's request carries a transaction")
				}
				got = err
				w.WriteHeader(599)
			}))
			rec := httptest.NewRecorder()
			ordersMux(mw, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})).
				ServeHTTP(rec, httptest.NewRequest("GET", tt.path, nil))
			if !errors.Is(got, tt.want) {
				t.Errorf("error handler got %v, want a match for %v", got, tt.want)
			}
			if rec.Code != 599 {
				t.Errorf("status %d, want the error handler's 599", rec.Code)
			}
			if rec.Header().Get("Retry-After") != "" {
				t.Error("Retry-After set although the error handler replaces the default")
			}
		})
	}
}

// TestXactLockErrorHandlerCannotSucceed checks that an error handler that
// answers a failure with a success, or with nothing, sends 500 instead:
// after a failed commit, a 2xx would report work that was rolled back.
func TestXactLockErrorHandlerCannotSucceed(t *testing.T) {
	t.Parallel()
	answers := map[string]func(w http.ResponseWriter){
		"OK":        func(w http.ResponseWriter) { w.WriteHeader(http.StatusOK) },
		"Created":   func(w http.ResponseWriter) { w.WriteHeader(http.StatusCreated); io.WriteString(w, "created") },
		"Redirect":  func(w http.ResponseWriter) { w.Header().Set("Location", "/x"); w.WriteHeader(http.StatusFound) },
		"WriteOnly": func(w http.ResponseWriter) { io.WriteString(w, "fine") },
		"FlushOnly": func(w http.ResponseWriter) { http.NewResponseController(w).Flush() },
		"Nothing":   func(w http.ResponseWriter) {},
	}
	for name, answer := range answers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db, m := mock.New(t, exact)
			expectLocked(m)
			m.ExpectCommit().WillReturnError(errSecret)
			var got error
			mw := lock(db, httplock.ErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
				got = err
				answer(w)
			}))
			rec := httptest.NewRecorder()
			ordersMux(mw, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusCreated)
			})).ServeHTTP(rec, httptest.NewRequest("POST", "/orders/42", nil))
			if !errors.Is(got, httplock.ErrCommit) {
				t.Errorf("error handler got %v, want ErrCommit", got)
			}
			if rec.Code != http.StatusInternalServerError {
				t.Errorf("status %d, want 500", rec.Code)
			}
		})
	}
}

// TestXactLockNoLock checks that a KeyFunc returning ErrNoLock serves the
// request without a transaction and without touching the database.
func TestXactLockNoLock(t *testing.T) {
	t.Parallel()
	db, _ := mock.New(t, exact) // no expectations: any statement fails the test
	key := func(r *http.Request) (advisory.Key, error) {
		if r.Method == http.MethodGet {
			return advisory.Key{}, fmt.Errorf("reads are not locked: %w", httplock.ErrNoLock)
		}
		return httplock.PathKey(ordersNS, "id")(r)
	}
	called := false
	h := httplock.XactLock(db, key)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		called = true
		if tx, ok := advisory.TxFromContext(r.Context()); ok {
			t.Errorf("the handler got a transaction %p", tx)
		}
		io.WriteString(w, "read")
	}))
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/orders/42", nil)
	// A transaction that a layer further out put in the context must not
	// show through either.
	h.ServeHTTP(rec, req.WithContext(advisory.NewTxContext(req.Context(), &sql.Tx{})))
	if !called || rec.Code != 200 || rec.Body.String() != "read" {
		t.Errorf("called %v, got %d %q", called, rec.Code, rec.Body)
	}
}

// TestXactLockPanic checks that a panicking handler's transaction is rolled
// back and that the panic goes on with its own value.
func TestXactLockPanic(t *testing.T) {
	t.Parallel()
	for name, v := range map[string]any{"Value": "boom", "ErrAbortHandler": http.ErrAbortHandler} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db, m := mock.New(t, exact)
			expectLocked(m)
			m.ExpectExec("UPDATE orders SET paid = true WHERE id = 42").WillReturnResult(affected(1))
			m.ExpectRollback()
			mux := ordersMux(lock(db), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tx, _ := advisory.TxFromContext(r.Context())
				if _, err := tx.ExecContext(r.Context(), "UPDATE orders SET paid = true WHERE id = 42"); err != nil {
					t.Error(err)
				}
				panic(v)
			}))
			rec := newSpy(m)
			defer func() {
				if got := recover(); got != v {
					t.Errorf("recovered %v, want %v", got, v)
				}
				if rec.wrote {
					t.Error("a panicking handler's response was written")
				}
			}()
			mux.ServeHTTP(rec, httptest.NewRequest("POST", "/orders/42", nil))
			t.Error("the panic did not continue")
		})
	}
}

// TestXactLockHandlerUsesTx checks that the handler's statements run in the
// request's transaction, between the lock and the commit.
func TestXactLockHandlerUsesTx(t *testing.T) {
	t.Parallel()
	db, m := mock.New(t, exact)
	expectLocked(m)
	m.ExpectExec("UPDATE orders SET paid = true WHERE id = 42").WillReturnResult(affected(1))
	m.ExpectCommit()
	spy := newSpy(m)
	ordersMux(lock(db), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := advisory.TxFromContext(r.Context())
		if _, err := tx.ExecContext(r.Context(), "UPDATE orders SET paid = true WHERE id = 42"); err != nil {
			t.Error(err)
		}
		w.WriteHeader(http.StatusNoContent)
		if _, err := tx.ExecContext(r.Context(), "SELECT 1"); !errors.Is(err, sql.ErrTxDone) {
			t.Errorf("the transaction is still usable after the response began: %v", err)
		}
	})).ServeHTTP(spy, httptest.NewRequest("POST", "/orders/42", nil))
	if spy.Code != 204 || spy.atWrite != nil {
		t.Errorf("status %d; expectations at the first write: %v", spy.Code, spy.atWrite)
	}
}

// TestXactLockClosedDB checks that a closed *sql.DB is answered as an
// unavailable database.
func TestXactLockClosedDB(t *testing.T) {
	t.Parallel()
	db, _ := mock.New(t, exact)
	db.Close()
	var got error
	rec := httptest.NewRecorder()
	ordersMux(lock(db, httplock.ErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
		got = err
		http.Error(w, "service unavailable", http.StatusServiceUnavailable)
	})), http.NotFoundHandler()).ServeHTTP(rec, httptest.NewRequest("GET", "/orders/42", nil))
	if !errors.Is(got, httplock.ErrUnavailable) || rec.Code != 503 {
		t.Errorf("got %d, error %v; want 503 and ErrUnavailable", rec.Code, got)
	}
}
