package grpclock_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
	"github.com/pgadvisory/pgadvisory/middleware"
	"github.com/pgadvisory/pgadvisory/middleware/grpclock"
)

// ordersNS is the namespace of order keys in the tests.
const ordersNS = 7

// errSecret stands for a driver error whose text must never reach a
// client.
var errSecret = errors.New("secret: SELECT pg_advisory_xact_lock failed on host db-7")

var (
	tryLock42 = sqltext.TryLock(true, false, sqltext.PairArg(ordersNS, 42))
	waitLock  = sqltext.LockTimeout(sqltext.Lock(true, false, sqltext.PairArg(ordersNS, 42)), 1500, true)
	tryAcme   = sqltext.TryLock(true, false, sqltext.PairArg(ordersNS, advisory.HashText("acme")))
)

const update42 = "UPDATE orders SET paid = true WHERE id = 42"

func TestUnaryOutcomes(t *testing.T) {
	t.Parallel()
	errClosed := status.Error(codes.FailedPrecondition, "order closed")
	tests := []struct {
		name       string
		opts       []grpclock.Option
		method     string
		req        proto.Message
		expect     func(m sqlmock.Sqlmock)
		handlerErr error
		wantCode   codes.Code
		wantMsg    string
		wantCalled bool
	}{
		{
			name: "Commit", method: methodPay, req: wrapperspb.Int64(42),
			expect: func(m sqlmock.Sqlmock) {
				m.ExpectBegin()
				m.ExpectExec(tryLock42).WithoutArgs().WillReturnResult(rows(1))
				m.ExpectExec(update42).WillReturnResult(rows(1))
				m.ExpectCommit()
			},
			wantCode: codes.OK, wantCalled: true,
		},
		{
			name: "StringField", method: methodRename, req: wrapperspb.String("acme"),
			expect: func(m sqlmock.Sqlmock) {
				m.ExpectBegin()
				m.ExpectExec(tryAcme).WithoutArgs().WillReturnResult(rows(1))
				m.ExpectExec(update42).WillReturnResult(rows(1))
				m.ExpectCommit()
			},
			wantCode: codes.OK, wantCalled: true,
		},
		{
			name: "HandlerErrorRollsBack", method: methodPay, req: wrapperspb.Int64(42), handlerErr: errClosed,
			expect: func(m sqlmock.Sqlmock) {
				m.ExpectBegin()
				m.ExpectExec(tryLock42).WithoutArgs().WillReturnResult(rows(1))
				m.ExpectExec(update42).WillReturnResult(rows(1))
				m.ExpectRollback()
			},
			wantCode: codes.FailedPrecondition, wantMsg: "order closed", wantCalled: true,
		},
		{
			name: "NotAcquired", method: methodPay, req: wrapperspb.Int64(42),
			expect: func(m sqlmock.Sqlmock) {
				m.ExpectBegin()
				m.ExpectExec(tryLock42).WithoutArgs().WillReturnResult(rows(0))
				m.ExpectRollback()
			},
			wantCode: codes.Aborted, wantMsg: "grpclock: resource busy: another call holds its lock; retry later",
		},
		{
			name: "WaitExpires", method: methodPay, req: wrapperspb.Int64(42),
			opts: []grpclock.Option{grpclock.Wait(1500 * time.Millisecond)},
			expect: func(m sqlmock.Sqlmock) {
				m.ExpectBegin()
				m.ExpectExec(waitLock).WithoutArgs().WillReturnError(&sqlState{"55P03", "canceling statement due to lock timeout"})
				m.ExpectRollback()
			},
			wantCode: codes.Aborted,
		},
		{
			name: "WaitGranted", method: methodPay, req: wrapperspb.Int64(42),
			opts: []grpclock.Option{grpclock.Wait(1500 * time.Millisecond)},
			expect: func(m sqlmock.Sqlmock) {
				m.ExpectBegin()
				m.ExpectExec(waitLock).WithoutArgs().WillReturnResult(rows(0))
				m.ExpectExec(update42).WillReturnResult(rows(1))
				m.ExpectCommit()
			},
			wantCode: codes.OK, wantCalled: true,
		},
		{
			name: "IDOutOfRange", method: methodPay, req: wrapperspb.Int64(1 << 40), expect: func(sqlmock.Sqlmock) {},
			wantCode: codes.InvalidArgument, wantMsg: `grpclock: bad lock key: field "value" = 1099511627776: out of range [-2147483648, 2147483647]`,
		},
		{
			name: "IDMissing", method: methodPay, req: wrapperspb.Int64(0), expect: func(sqlmock.Sqlmock) {},
			wantCode: codes.InvalidArgument, wantMsg: `grpclock: bad lock key: field "value" is unset or zero`,
		},
		{
			name: "NameMissing", method: methodRename, req: wrapperspb.String(""), expect: func(sqlmock.Sqlmock) {},
			wantCode: codes.InvalidArgument,
		},
		{
			name: "BeginUnavailable", method: methodPay, req: wrapperspb.Int64(42),
			expect: func(m sqlmock.Sqlmock) {
				m.ExpectBegin().WillReturnError(&net.OpError{Op: "dial", Net: "tcp", Err: errSecret})
			},
			wantCode: codes.Unavailable, wantMsg: "grpclock: database unavailable",
		},
		{
			name: "LockAdminShutdown", method: methodPay, req: wrapperspb.Int64(42),
			expect: func(m sqlmock.Sqlmock) {
				m.ExpectBegin()
				m.ExpectExec(tryLock42).WithoutArgs().WillReturnError(&sqlState{"57P01", errSecret.Error()})
				m.ExpectRollback()
			},
			wantCode: codes.Unavailable,
		},
		{
			name: "LockOtherError", method: methodPay, req: wrapperspb.Int64(42),
			expect: func(m sqlmock.Sqlmock) {
				m.ExpectBegin()
				m.ExpectExec(tryLock42).WithoutArgs().WillReturnError(&sqlState{"XX000", errSecret.Error()})
				m.ExpectRollback()
			},
			wantCode: codes.Internal, wantMsg: "grpclock: internal error",
		},
		{
			name: "CommitFails", method: methodPay, req: wrapperspb.Int64(42),
			expect: func(m sqlmock.Sqlmock) {
				m.ExpectBegin()
				m.ExpectExec(tryLock42).WithoutArgs().WillReturnResult(rows(1))
				m.ExpectExec(update42).WillReturnResult(rows(1))
				m.ExpectCommit().WillReturnError(errSecret)
			},
			wantCode: codes.Internal, wantMsg: "grpclock: commit failed; the call's work was rolled back", wantCalled: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, m := newMock(t)
			tt.expect(m)
			called := false
			svc := &ordersService{unary: func(ctx context.Context, req proto.Message) error {
				called = true
				tx, ok := middleware.TxFromContext(ctx)
				if !ok {
					t.Error("no transaction in the handler's context")
					return nil
				}
				if _, err := tx.ExecContext(ctx, update42); err != nil {
					t.Error(err)
				}
				return tt.handlerErr
			}}
			conn := startServer(t, svc, grpc.UnaryInterceptor(
				grpclock.UnaryServerInterceptor(db, grpclock.FieldKey(ordersNS, "value"), tt.opts...)))
			err := conn.Invoke(context.Background(), tt.method, tt.req, new(wrapperspb.StringValue))
			s := status.Convert(err)
			if s.Code() != tt.wantCode {
				t.Errorf("code %v (%v), want %v", s.Code(), err, tt.wantCode)
			}
			if tt.wantMsg != "" && s.Message() != tt.wantMsg {
				t.Errorf("message %q, want %q", s.Message(), tt.wantMsg)
			}
			if strings.Contains(s.Message(), "secret") || strings.Contains(s.Message(), "SELECT") {
				t.Errorf("message %q leaks a driver message", s.Message())
			}
			if called != tt.wantCalled {
				t.Errorf("handler called: %v, want %v", called, tt.wantCalled)
			}
		})
	}
}

// unaryInfo is the info the server passes for Pay.
var unaryInfo = &grpc.UnaryServerInfo{FullMethod: methodPay}

// TestUnaryPanic checks that a panicking handler's transaction is rolled
// back and that the panic continues. gRPC does not recover panics, so the
// interceptor is called directly.
func TestUnaryPanic(t *testing.T) {
	t.Parallel()
	db, m := newMock(t)
	m.ExpectBegin()
	m.ExpectExec(tryLock42).WithoutArgs().WillReturnResult(rows(1))
	m.ExpectRollback()
	interceptor := grpclock.UnaryServerInterceptor(db, grpclock.FieldKey(ordersNS, "value"))
	defer func() {
		if v := recover(); v != "boom" {
			t.Errorf("recovered %v, want boom", v)
		}
	}()
	interceptor(context.Background(), wrapperspb.Int64(42), unaryInfo, func(ctx context.Context, req any) (any, error) {
		panic("boom")
	})
	t.Error("the panic did not continue")
}

// TestUnaryContextEnded checks that a call whose context has ended gets
// the matching code.
func TestUnaryContextEnded(t *testing.T) {
	t.Parallel()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(1, 0))
	defer cancel2()
	for name, tt := range map[string]struct {
		ctx  context.Context
		want codes.Code
	}{
		"Canceled":         {cancelled, codes.Canceled},
		"DeadlineExceeded": {expired, codes.DeadlineExceeded},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db, _ := newMock(t)
			interceptor := grpclock.UnaryServerInterceptor(db, grpclock.FieldKey(ordersNS, "value"))
			_, err := interceptor(tt.ctx, wrapperspb.Int64(42), unaryInfo, func(ctx context.Context, req any) (any, error) {
				t.Error("handler called")
				return nil, nil
			})
			if got := status.Code(err); got != tt.want {
				t.Errorf("code %v (%v), want %v", got, err, tt.want)
			}
		})
	}
}

// TestKeyFuncStatus checks that a key function's own status passes
// through, and that a plain error becomes InvalidArgument.
func TestKeyFuncStatus(t *testing.T) {
	t.Parallel()
	db, _ := newMock(t)
	for name, tt := range map[string]struct {
		err  error
		want codes.Code
	}{
		"Plain":    {errors.New("no tenant"), codes.InvalidArgument},
		"NotFound": {status.Error(codes.NotFound, "no such tenant"), codes.NotFound},
	} {
		key := func(context.Context, string, any) (advisory.Key, error) { return advisory.Key{}, tt.err }
		_, err := grpclock.UnaryServerInterceptor(db, key)(context.Background(), nil, unaryInfo,
			func(context.Context, any) (any, error) { t.Error("handler called"); return nil, nil })
		if got := status.Code(err); got != tt.want {
			t.Errorf("%s: code %v, want %v", name, got, tt.want)
		}
	}
}

// TestBuildPanics checks that bad configuration panics at build time,
// naming the package.
func TestBuildPanics(t *testing.T) {
	t.Parallel()
	db, _ := newMock(t)
	for name, build := range map[string]func(){
		"UnaryNilDB":       func() { grpclock.UnaryServerInterceptor(nil, grpclock.FieldKey(1, "id")) },
		"UnaryNilKey":      func() { grpclock.UnaryServerInterceptor(db, nil) },
		"StreamNilDB":      func() { grpclock.StreamServerInterceptor(nil, grpclock.MetadataKey(1, "x-id")) },
		"StreamNilKey":     func() { grpclock.StreamServerInterceptor(db, nil) },
		"NegativeWait":     func() { grpclock.Wait(-time.Second) },
		"WaitTooLong":      func() { grpclock.Wait(1 << 62) },
		"BadFieldName":     func() { grpclock.FieldKey(1, "order-id") },
		"EmptyFieldName":   func() { grpclock.FieldKey(1, "") },
		"EmptyMetadataKey": func() { grpclock.MetadataKey(1, "") },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				s, ok := recover().(string)
				if !ok || !strings.HasPrefix(s, "grpclock: ") {
					t.Errorf("panic %q, want one starting with %q", s, "grpclock: ")
				}
			}()
			build()
		})
	}
}
