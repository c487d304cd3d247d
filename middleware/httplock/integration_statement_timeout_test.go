package httplock_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/httplock"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// statementTimeout is the server-side statement_timeout of the sessions
// in TestIntegrationStatementTimeout: far shorter than the middleware's
// Wait, so that the server, not Wait, ends the wait.
const statementTimeout = "200ms"

// TestIntegrationStatementTimeout checks that a request whose wait for a
// busy lock the server cancels, because the session's statement_timeout is
// shorter than Wait, is answered as a busy lock: 409 Conflict with
// Retry-After, not 500. The server reports that cancel as SQLSTATE 57014,
// while the request's context is still live.
func TestIntegrationStatementTimeout(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		ns := testNamespace(t)
		holder := pgtest.Conn(t, tg.DB)
		pgtest.Exec(t, holder, "SELECT pg_advisory_lock($1, 42)", ns)
		defer holder.ExecContext(context.Background(), "SELECT pg_advisory_unlock($1, 42)", ns)

		// A startup parameter, which both drivers pass on to the server.
		db := pgtest.OpenSetting(t, tg, "statement_timeout", statementTimeout)
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
