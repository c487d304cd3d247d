package grpclock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/grpclock"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// safetyNet bounds every wait, so that a broken build fails instead of
// hanging. No test asserts on time.
const safetyNet = time.Minute

// orderApp is the service under the interceptors. Each call inserts a row
// (id, tag) through its transaction, where the tag comes from the "tag"
// metadata; "block" makes it wait, after the insert, until the test
// releases it; "fail" makes it return an error.
type orderApp struct {
	t       *testing.T
	table   string
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newOrderApp(t *testing.T, db *sql.DB) *orderApp {
	t.Helper()
	a := &orderApp{
		t:       t,
		table:   fmt.Sprintf("grpclock_orders_%08x", uint32(advisory.HashText(t.Name()))),
		entered: make(chan struct{}, 4),
		release: make(chan struct{}),
	}
	if _, err := db.Exec("CREATE TABLE " + a.table + " (order_id bigint NOT NULL, tag text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := db.Exec("DROP TABLE " + a.table); err != nil {
			t.Error(err)
		}
	})
	return a
}

func (a *orderApp) unblock() { a.once.Do(func() { close(a.release) }) }

// work is the handler of every method.
func (a *orderApp) work(ctx context.Context, id int64) error {
	tx, ok := advisory.TxFromContext(ctx)
	if !ok {
		a.t.Error("no transaction in the call's context")
		return status.Error(codes.Internal, "no transaction")
	}
	md, _ := metadata.FromIncomingContext(ctx)
	get := func(k string) string {
		if v := md.Get(k); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+a.table+" (order_id, tag) VALUES ($1, $2)", id, get("tag")); err != nil {
		a.t.Errorf("insert: %v", err)
	}
	if get("block") != "" {
		a.entered <- struct{}{}
		select {
		case <-a.release:
		case <-ctx.Done():
		}
	}
	if get("fail") != "" {
		return status.Error(codes.FailedPrecondition, "order closed")
	}
	return nil
}

func (a *orderApp) service() *ordersService {
	return &ordersService{
		unary: func(ctx context.Context, req proto.Message) error {
			return a.work(ctx, req.(*wrapperspb.Int64Value).GetValue())
		},
		stream: func(ss grpc.ServerStream) error {
			id, _ := strconv.ParseInt(metadata.ValueFromIncomingContext(ss.Context(), "x-order-id")[0], 10, 64)
			if err := ss.SendMsg(wrapperspb.String("started")); err != nil {
				return err
			}
			return a.work(ss.Context(), id)
		},
	}
}

// rows counts the committed rows with tag.
func (a *orderApp) rows(t *testing.T, db *sql.DB, tag string) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM "+a.table+" WHERE tag = $1", tag).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// awaitBlocked waits until the call behind pending blocks in its handler,
// holding the lock.
func awaitBlocked(t *testing.T, a *orderApp, pending <-chan error) {
	t.Helper()
	select {
	case <-a.entered:
	case err := <-pending:
		t.Fatalf("the first call ended before it blocked: %v", err)
	case <-time.After(safetyNet):
		t.Fatal("the first call never reached its handler")
	}
}

func await(t *testing.T, pending <-chan error) error {
	t.Helper()
	select {
	case err := <-pending:
		return err
	case <-time.After(safetyNet):
		t.Fatal("no answer")
		return nil
	}
}

// async runs f in a goroutine; the test must receive its result.
func async(f func() error) <-chan error {
	c := make(chan error, 1)
	go func() { c <- f() }()
	return c
}

func TestIntegration(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		t.Run("Unary", func(t *testing.T) { testUnary(t, tg.DB) })
		t.Run("Stream", func(t *testing.T) { testStream(t, tg.DB) })
		t.Run("StreamCancelled", func(t *testing.T) { testStreamCancelled(t, tg.DB) })
		pgtest.AwaitIdle(t, tg.DB)
	})
}

// ctxWith returns a context with outgoing metadata kv and the safety net.
func ctxWith(t *testing.T, kv ...string) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), safetyNet)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

// serveOrders serves a's service with both interceptors, unary calls
// locked on their "value" field and streams on their x-order-id metadata,
// in the namespace ns, with opts, and returns a client connection and the
// channel where an interceptor further out reports what each call
// returned.
func serveOrders(t *testing.T, db *sql.DB, a *orderApp, ns int32, opts ...grpclock.Option) (*grpc.ClientConn, <-chan error) {
	t.Helper()
	ended := make(chan error, 16)
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
		grpc.ChainUnaryInterceptor(outerUnary, grpclock.UnaryServerInterceptor(db, grpclock.FieldKey(ns, "value"), opts...)),
		grpc.ChainStreamInterceptor(outerStream, grpclock.StreamServerInterceptor(db, grpclock.MetadataKey(ns, "x-order-id"), opts...)))
	return conn, ended
}

// testUnary: two concurrent calls for order 42 give one OK and one
// Aborted; a bad id gives InvalidArgument; a failing handler's work is
// rolled back and an OK call's work is committed by the time it returns.
func testUnary(t *testing.T, db *sql.DB) {
	a := newOrderApp(t, db)
	conn, _ := serveOrders(t, db, a, testNamespace(t))
	t.Cleanup(a.unblock) // before the server stops

	first := async(func() error { return pay(ctxWith(t, "tag", "first", "block", "1"), conn, 42) })
	awaitBlocked(t, a, first)
	second := pay(ctxWith(t, "tag", "second"), conn, 42)
	other := pay(ctxWith(t, "tag", "other"), conn, 43)
	a.unblock()
	if err := await(t, first); err != nil {
		t.Errorf("first call: %v", err)
	}
	if got := status.Code(second); got != codes.Aborted {
		t.Errorf("second call: %v, want Aborted", second)
	}
	if other != nil {
		t.Errorf("call for another order: %v", other)
	}
	if a.rows(t, db, "first") != 1 || a.rows(t, db, "other") != 1 || a.rows(t, db, "second") != 0 {
		t.Error("rows do not match the calls' outcomes")
	}

	if err := pay(ctxWith(t, "tag", "huge"), conn, 1<<40); status.Code(err) != codes.InvalidArgument {
		t.Errorf("id out of range: %v, want InvalidArgument", err)
	}
	if err := pay(ctxWith(t, "tag", "failed", "fail", "1"), conn, 42); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("failing handler: %v, want its own FailedPrecondition", err)
	}
	if a.rows(t, db, "failed") != 0 {
		t.Error("a failed call's work was committed")
	}
}

// testStream: two concurrent streams for order 42 give one OK and one
// Aborted, and so does a unary call for order 42 while the stream holds
// it: MetadataKey and FieldKey take the same lock.
func testStream(t *testing.T, db *sql.DB) {
	a := newOrderApp(t, db)
	conn, _ := serveOrders(t, db, a, testNamespace(t))
	t.Cleanup(a.unblock)

	first := async(func() error {
		_, err := watch(ctxWith(t), conn, "x-order-id", "42", "tag", "first", "block", "1")
		return err
	})
	awaitBlocked(t, a, first)
	msgs, second := watch(ctxWith(t), conn, "x-order-id", "42", "tag", "second")
	unary := pay(ctxWith(t, "tag", "unary"), conn, 42)
	a.unblock()
	if err := await(t, first); err != nil {
		t.Errorf("first stream: %v", err)
	}
	if status.Code(second) != codes.Aborted || len(msgs) != 0 {
		t.Errorf("second stream: %v after %d messages, want Aborted before any", second, len(msgs))
	}
	if status.Code(unary) != codes.Aborted {
		t.Errorf("unary call for the stream's order: %v, want Aborted", unary)
	}
	if a.rows(t, db, "first") != 1 || a.rows(t, db, "second") != 0 || a.rows(t, db, "unary") != 0 {
		t.Error("rows do not match the calls' outcomes")
	}
	if _, err := watch(ctxWith(t), conn, "tag", "none"); status.Code(err) != codes.InvalidArgument {
		t.Errorf("stream without x-order-id: %v, want InvalidArgument", err)
	}
	if _, err := watch(ctxWith(t), conn, "x-order-id", "42", "tag", "failed", "fail", "1"); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("failing stream: %v, want FailedPrecondition", err)
	}
	if a.rows(t, db, "failed") != 0 {
		t.Error("a failed stream's work was committed")
	}
}

// testStreamCancelled: the client cancels a stream whose handler holds the
// lock. The handler's work is not committed, the interceptor reports
// context.Canceled, the lock is free again, and the connection goes back
// to the pool.
func testStreamCancelled(t *testing.T, db *sql.DB) {
	a := newOrderApp(t, db)
	ns := testNamespace(t)
	conn, ended := serveOrders(t, db, a, ns)
	t.Cleanup(a.unblock)

	ctx, cancel := context.WithCancel(ctxWith(t))
	defer cancel()
	gone := async(func() error {
		_, err := watch(ctx, conn, "x-order-id", "42", "tag", "gone", "block", "1")
		return err
	})
	awaitBlocked(t, a, gone)
	cancel()
	if err := await(t, gone); status.Code(err) != codes.Canceled {
		t.Errorf("the client got %v, want Canceled", err)
	}
	if err := await(t, ended); !errors.Is(err, context.Canceled) || status.Code(err) != codes.Canceled {
		t.Errorf("the interceptor returned %v, want a Canceled status matching context.Canceled", err)
	}
	if n := a.rows(t, db, "gone"); n != 0 {
		t.Errorf("the cancelled stream's work left %d rows, want 0", n)
	}
	// The server ends the cancelled call's session, and so frees the
	// lock, a moment after the client saw the call fail.
	pgtest.AwaitFree(t, db, advisory.PairKey(ns, 42))
	if _, err := watch(ctxWith(t), conn, "x-order-id", "42", "tag", "after"); err != nil {
		locks, _ := pgtest.LocksOf(context.Background(), db, advisory.PairKey(ns, 42))
		t.Errorf("the next stream for the order: %v (pg_locks now shows %v); ended: %v", err, locks, errors.Unwrap(await(t, ended)))
	}
	pgtest.AwaitIdle(t, db)
}

// testNamespace gives each test its own key namespace, so that tests
// sharing a server never share a lock.
func testNamespace(t *testing.T) int32 { return advisory.HashText(t.Name()) & 0x7fffffff }
