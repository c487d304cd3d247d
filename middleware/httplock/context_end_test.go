package httplock_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/httplock"
	"github.com/pgadvisory/pgadvisory/mock"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// TestXactLockContextEnded checks the answers to a request whose context
// has ended before the lock: a deadline gets 503, a client that went away
// gets 499 and no body, and neither reaches the handler or the database.
func TestXactLockContextEnded(t *testing.T) {
	t.Parallel()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(1, 0))
	defer cancel2()
	tests := []struct {
		name       string
		ctx        context.Context
		want       error
		wantStatus int
		wantBody   string
	}{
		{"Canceled", cancelled, context.Canceled, httplock.StatusClientClosedRequest, ""},
		{"DeadlineExceeded", expired, context.DeadlineExceeded, http.StatusServiceUnavailable, "service unavailable\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, _ := mock.New(t, exact) // no expectations: the database is not touched
			handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("handler called") })
			req := httptest.NewRequest("POST", "/orders/42", nil).WithContext(tt.ctx)

			rec := httptest.NewRecorder()
			ordersMux(lock(db), handler).ServeHTTP(rec, req)
			if rec.Code != tt.wantStatus || rec.Body.String() != tt.wantBody {
				t.Errorf("got %d %q, want %d %q", rec.Code, rec.Body, tt.wantStatus, tt.wantBody)
			}

			var got error
			rec = httptest.NewRecorder()
			ordersMux(lock(db, httplock.ErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
				got = err
				w.WriteHeader(http.StatusTeapot)
			})), handler).ServeHTTP(rec, req)
			if !errors.Is(got, tt.want) || rec.Code != http.StatusTeapot {
				t.Errorf("error handler got %v and answered %d; want a match for %v", got, rec.Code, tt.want)
			}
		})
	}
}

// TestXactLockCancelledWhileLocking checks a client that goes away while
// the lock statement runs: the driver's own error (sqlmock's "canceling
// query") is reported as context.Canceled, the transaction rolls back, and
// the handler is not called.
func TestXactLockCancelledWhileLocking(t *testing.T) {
	t.Parallel()
	db, m := mock.New(t, exact)
	mock.ExpectWithXactLock(m, order42, mock.XactFailed, advisory.Wait(time.Minute)).Lock.
		WillDelayFor(time.Minute).WillReturnError(errors.New("not reached"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan error, 1)
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		ordersMux(lock(db, httplock.Wait(time.Minute), httplock.ErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
			errs <- err
			w.WriteHeader(httplock.StatusClientClosedRequest)
		})), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("handler called") })).
			ServeHTTP(rec, httptest.NewRequest("POST", "/orders/42", nil).WithContext(ctx))
	}()
	// The lock statement is running once the only expectation left unmet
	// is the rollback.
	pgtest.Await(t, "the lock statement to run", func() (bool, error) {
		err := m.ExpectationsWereMet()
		return err != nil && strings.Contains(err.Error(), "Rollback"), nil
	})
	cancel()
	<-done
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Errorf("error handler got %v, want context.Canceled", err)
	}
	// database/sql may roll back in its own goroutine.
	pgtest.Await(t, "database/sql's rollback", func() (bool, error) { return m.ExpectationsWereMet() == nil, nil })
}

// endingCtx is a context that reports its end through Err once end is
// called, but never closes Done, so that database/sql does not roll back
// on its own: it stands for a client that goes away just before the
// handler writes.
type endingCtx struct {
	context.Context
	ended atomic.Bool
}

func (c *endingCtx) end() { c.ended.Store(true) }

func (c *endingCtx) Err() error {
	if c.ended.Load() {
		return context.Canceled
	}
	return nil
}

// TestXactLockClientGoneMidHandler checks that a handler whose client
// goes away before it writes has its work rolled back, not committed,
// although it answers with a success.
func TestXactLockClientGoneMidHandler(t *testing.T) {
	t.Parallel()
	db, m := mock.New(t, exact)
	expectLocked(m)
	m.ExpectExec("UPDATE orders SET paid = true WHERE id = 42").WillReturnResult(affected(1))
	m.ExpectRollback()
	ctx := &endingCtx{Context: context.Background()}
	var got error
	spy := newSpy(m)
	ordersMux(lock(db, httplock.ErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
		got = err
		w.WriteHeader(httplock.StatusClientClosedRequest)
	})), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := advisory.TxFromContext(r.Context())
		if _, err := tx.ExecContext(r.Context(), "UPDATE orders SET paid = true WHERE id = 42"); err != nil {
			t.Error(err)
		}
		ctx.end()
		w.WriteHeader(http.StatusCreated)
	})).ServeHTTP(spy, httptest.NewRequest("POST", "/orders/42", nil).WithContext(ctx))
	if !errors.Is(got, httplock.ErrCommit) || !errors.Is(got, context.Canceled) {
		t.Errorf("error handler got %v, want ErrCommit and context.Canceled", got)
	}
	if spy.Code != httplock.StatusClientClosedRequest || spy.atWrite != nil {
		t.Errorf("status %d; expectations at the first write: %v", spy.Code, spy.atWrite)
	}
}
