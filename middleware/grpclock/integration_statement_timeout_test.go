package grpclock_test

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/pgtest"
	"github.com/pgadvisory/pgadvisory/middleware/grpclock"
)

// statementTimeout is the server-side statement_timeout of the sessions
// in TestIntegrationStatementTimeout: far shorter than the interceptors'
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

// TestIntegrationStatementTimeout checks that a call whose wait for a
// busy lock the server cancels, because the session's statement_timeout is
// shorter than Wait, fails as a busy lock does: codes.Aborted with a
// RetryInfo detail, and an error matching advisory.ErrLockTimeout for the
// interceptors further out. The server reports that cancel as SQLSTATE
// 57014, while the call's context is still live.
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
		a := newOrderApp(t, tg.DB)
		ended := make(chan error, 4)
		outerUnary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			resp, err := h(ctx, req)
			ended <- err
			return resp, err
		}
		outerStream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			err := h(srv, ss)
			ended <- err
			return err
		}
		conn := startServer(t, a.service(),
			grpc.ChainUnaryInterceptor(outerUnary,
				grpclock.UnaryServerInterceptor(db, grpclock.FieldKey(ns, "value"), grpclock.Wait(safetyNet))),
			grpc.ChainStreamInterceptor(outerStream,
				grpclock.StreamServerInterceptor(db, grpclock.MetadataKey(ns, "x-order-id"), grpclock.Wait(safetyNet))))

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
