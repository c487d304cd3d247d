package httplock_test

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/httplock"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// TestIntegrationClientGone checks, on real servers, what happens when a
// client goes away: its transaction rolls back, nothing is committed, the
// lock is free again, and no connection stays in use.
func TestIntegrationClientGone(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Run("MidHandler", func(t *testing.T) { testGoneMidHandler(t, tg.DB) })
		t.Run("DuringWait", func(t *testing.T) { testGoneDuringWait(t, tg.DB) })
		pgtest.AwaitIdle(t, tg.DB)
	})
}

// recordErrors returns an ErrorHandler that sends each error to the
// channel it returns, then answers as the default would for a client
// that went away.
func recordErrors() (httplock.Option, <-chan error) {
	errs := make(chan error, 8)
	return httplock.ErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
		errs <- err
		w.WriteHeader(httplock.StatusClientClosedRequest)
	}), errs
}

// awaitError receives the next error the middleware reported.
func awaitError(t *testing.T, errs <-chan error) error {
	t.Helper()
	select {
	case err := <-errs:
		return err
	case <-time.After(safetyNet):
		t.Fatal("the middleware reported no error")
		return nil
	}
}

// testGoneMidHandler: the client goes away while its handler holds the
// lock. The handler's write after that cannot commit: database/sql has
// rolled the transaction back with the request's context.
func testGoneMidHandler(t *testing.T, db *sql.DB) {
	a := newOrderApp(t, db)
	ns := testNamespace(t)
	onError, errs := recordErrors()
	srv := serve(t, routers[0].route(db, ns, []httplock.Option{onError}, a))
	t.Cleanup(a.unblock)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gone := fetchAsyncCtx(ctx, srv.URL+"/orders/42?tag=gone&block")
	awaitBlocked(t, a, gone)
	cancel()
	if r := await(t, gone); r.err == nil {
		t.Fatalf("the cancelled request got %d", r.status)
	}
	err := awaitError(t, errs)
	if !errors.Is(err, httplock.ErrCommit) || !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want ErrCommit and context.Canceled", err)
	}
	if n := a.rows(t, db, "gone"); n != 0 {
		t.Errorf("the gone client's work left %d rows, want 0", n)
	}
	// The server ends the gone client's session, and so frees the lock,
	// a moment after the client saw its request fail.
	pgtest.AwaitFree(t, db, advisory.PairKey(ns, 42))
	if r := fetch(srv.URL + "/orders/42?tag=after"); r.status != http.StatusOK {
		t.Errorf("the next request got %d (%v), want 200; the error handler got %v", r.status, r.err, awaitError(t, errs))
	}
	srv.Close() // waits for the handlers
	pgtest.AwaitIdle(t, db)
}

// testGoneDuringWait: the client goes away while its request waits, on the
// server, for the lock another request holds. Its handler is never called,
// the error handler sees context.Canceled, and the holder is unaffected.
func testGoneDuringWait(t *testing.T, db *sql.DB) {
	a := newOrderApp(t, db)
	ns := testNamespace(t)
	onError, errs := recordErrors()
	srv := serve(t, routers[0].route(db, ns, []httplock.Option{httplock.Wait(safetyNet), onError}, a))
	t.Cleanup(a.unblock)

	first := fetchAsync(srv.URL + "/orders/42?tag=first&block")
	awaitBlocked(t, a, first)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waiter := fetchAsyncCtx(ctx, srv.URL+"/orders/42?tag=waiter")
	pgtest.AwaitWaiting(t, db, advisory.PairKey(ns, 42))
	cancel()
	if r := await(t, waiter); r.err == nil {
		t.Fatalf("the cancelled request got %d", r.status)
	}
	err := awaitError(t, errs)
	if !errors.Is(err, context.Canceled) || errors.Is(err, httplock.ErrCommit) {
		t.Errorf("error %v, want context.Canceled from the wait", err)
	}
	a.unblock()
	if r := await(t, first); r.status != http.StatusOK {
		t.Errorf("the lock holder got %d (%v), want 200", r.status, r.err)
	}
	if n := a.entries.Load(); n != 1 {
		t.Errorf("%d handlers ran, want 1: the cancelled waiter's must not", n)
	}
	if a.rows(t, db, "first") != 1 || a.rows(t, db, "waiter") != 0 {
		t.Error("rows do not match the requests' outcomes")
	}
	srv.Close()
	pgtest.AwaitIdle(t, db)
}
