package grpclock_test

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/grpclock"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// statementTimeout is the server-side statement_timeout of the sessions
// in TestIntegrationStatementTimeout: far shorter than the interceptors'
// Wait, so that the server, not Wait, ends the wait.
const statementTimeout = "200ms"

// TestIntegrationStatementTimeout checks that a call whose wait for a
// busy lock the server cancels, because the session's statement_timeout is
// shorter than Wait, fails as a busy lock does: codes.Aborted with a
// RetryInfo detail, and an error matching advisory.ErrLockTimeout for the
// interceptors further out. The server reports that cancel as SQLSTATE
// 57014, while the call's context is still live.
func TestIntegrationStatementTimeout(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		ns := testNamespace(t)
		holder := pgtest.Conn(t, tg.DB)
		pgtest.Exec(t, holder, "SELECT pg_advisory_lock($1, 42)", ns)
		defer holder.ExecContext(context.Background(), "SELECT pg_advisory_unlock($1, 42)", ns)

		// A startup parameter, which both drivers pass on to the server.
		db := pgtest.OpenSetting(t, tg, "statement_timeout", statementTimeout)
		a := newOrderApp(t, tg.DB)
		conn, ended := serveOrders(t, db, a, ns, grpclock.Wait(safetyNet))

		unary := pay(ctxWith(t, "tag", "unary"), conn, 42)
		checkBusy(t, "unary call", unary, await(t, ended))
		_, stream := watch(ctxWith(t), conn, "x-order-id", "42", "tag", "stream")
		checkBusy(t, "stream", stream, await(t, ended))
		if a.rows(t, tg.DB, "unary") != 0 || a.rows(t, tg.DB, "stream") != 0 {
			t.Error("a handler ran without the lock")
		}
	})
}

// checkBusy checks that the client got codes.Aborted with a RetryInfo
// detail, and that the interceptor returned an error matching
// advisory.ErrLockTimeout.
func checkBusy(t *testing.T, what string, client, server error) {
	t.Helper()
	st := status.Convert(client)
	hasRetry := false
	for _, d := range st.Details() {
		if _, ok := d.(*errdetails.RetryInfo); ok {
			hasRetry = true
		}
	}
	if st.Code() != codes.Aborted || !hasRetry {
		t.Errorf("%s: the client got %v (RetryInfo: %v), want Aborted with RetryInfo", what, client, hasRetry)
	}
	if !errors.Is(server, advisory.ErrLockTimeout) {
		t.Errorf("%s: the interceptor returned %v, want one matching advisory.ErrLockTimeout", what, server)
	}
}
