package httplock_test

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"net/url"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/pgtest"
	"github.com/pgadvisory/pgadvisory/middleware/httplock"
)

// statementTimeout is the server-side statement_timeout of the sessions
// in TestIntegrationStatementTimeout: far shorter than the middleware's
// Wait, so that the server, not Wait, ends the wait.
const statementTimeout = "200ms"

// openWithStatementTimeout opens a *sql.DB on tg's server and driver whose
// sessions start with statement_timeout set, as a role or database setting
// would set it, and checks that it took. It is closed at t's cleanup.
func openWithStatementTimeout(t *testing.T, tg pgtest.Target) *sql.DB {
	t.Helper()
	u, err := url.Parse(tg.Server.DSN)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	// A startup parameter, which both drivers pass on to the server.
	q.Set("statement_timeout", statementTimeout)
	u.RawQuery = q.Encode()
	srv := *tg.Server
	srv.DSN = u.String()
	db := srv.Open(t, tg.Driver)
	var got string
	if err := db.QueryRow("SHOW statement_timeout").Scan(&got); err != nil || got != statementTimeout {
		t.Fatalf("SHOW statement_timeout = %q, %v; want %q", got, err, statementTimeout)
	}
	return db
}

// TestIntegrationStatementTimeout checks that a request whose wait for a
// busy lock the server cancels, because the session's statement_timeout is
// shorter than Wait, is answered as a busy lock: 409 Conflict with
// Retry-After, not 500. The server reports that cancel as SQLSTATE 57014,
// while the request's context is still live.
func TestIntegrationStatementTimeout(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		ns := testNamespace(t)
		holder, err := tg.DB.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Close()
		if _, err := holder.ExecContext(context.Background(), "SELECT pg_advisory_lock($1, 42)", ns); err != nil {
			t.Fatal(err)
		}
		defer holder.ExecContext(context.Background(), "SELECT pg_advisory_unlock($1, 42)", ns)

		db := openWithStatementTimeout(t, tg)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("the handler ran without the lock") })
		srv := serve(t, routers[0].route(db, ns, []httplock.Option{httplock.Wait(safetyNet)}, h))
		r := fetch(srv.URL + "/orders/42")
		if r.status != http.StatusConflict || r.header.Get("Retry-After") != "1" {
			t.Errorf("status %d (Retry-After %q, err %v), want 409 with Retry-After: 1", r.status, r.header.Get("Retry-After"), r.err)
		}

		onError, errs := recordErrors()
		srv = serve(t, routers[0].route(db, ns, []httplock.Option{httplock.Wait(safetyNet), onError}, h))
		fetch(srv.URL + "/orders/42")
		if err := awaitError(t, errs); !errors.Is(err, advisory.ErrLockTimeout) {
			t.Errorf("the error handler got %v, want one matching advisory.ErrLockTimeout", err)
		}
	})
}
