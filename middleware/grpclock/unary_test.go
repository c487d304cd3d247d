package grpclock_test

import (
	"context"
	"database/sql"
	"net"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/grpclock"
	"github.com/pgadvisory/pgadvisory/mock"
)

func TestUnaryOutcomes(t *testing.T) {
	t.Parallel()
	errClosed := status.Error(codes.FailedPrecondition, "order closed")
	try := advisory.Try()
	granted := func(m sqlmock.Sqlmock) { mock.ExpectWithXactLock(m, order42, mock.XactGranted, try); expectUpdate42(m) }
	tests := []struct {
		name       string
		opts       []grpclock.Option
		key        grpclock.KeyFunc // nil for FieldKey(ordersNS, "value")
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
			expect:   func(m sqlmock.Sqlmock) { granted(m); m.ExpectCommit() },
			wantCode: codes.OK, wantCalled: true,
		},
		{
			name: "StringField", method: methodRename, req: wrapperspb.String("acme"),
			key: grpclock.FieldNameKey(ordersNS, "value"),
			expect: func(m sqlmock.Sqlmock) {
				mock.ExpectWithXactLock(m, advisory.NameKey(ordersNS, "acme"), mock.XactGranted, try)
				expectUpdate42(m)
				m.ExpectCommit()
			},
			wantCode: codes.OK, wantCalled: true,
		},
		{
			name: "HandlerErrorRollsBack", method: methodPay, req: wrapperspb.Int64(42), handlerErr: errClosed,
			expect:   func(m sqlmock.Sqlmock) { granted(m); m.ExpectRollback() },
			wantCode: codes.FailedPrecondition, wantMsg: "order closed", wantCalled: true,
		},
		{
			name: "NotAcquired", method: methodPay, req: wrapperspb.Int64(42),
			expect:   func(m sqlmock.Sqlmock) { mock.ExpectWithXactLock(m, order42, mock.XactNotAcquired, try) },
			wantCode: codes.Aborted, wantMsg: "grpclock: resource busy: another call holds its lock; retry later",
		},
		{
			name: "WaitExpires", method: methodPay, req: wrapperspb.Int64(42),
			opts: []grpclock.Option{grpclock.Wait(1500 * time.Millisecond)},
			expect: func(m sqlmock.Sqlmock) {
				mock.ExpectWithXactLock(m, order42, mock.XactFailed, advisory.Wait(1500*time.Millisecond)) // 55P03
			},
			wantCode: codes.Aborted,
		},
		{
			name: "WaitGranted", method: methodPay, req: wrapperspb.Int64(42),
			opts: []grpclock.Option{grpclock.Wait(1500 * time.Millisecond)},
			expect: func(m sqlmock.Sqlmock) {
				mock.ExpectWithXactLock(m, order42, mock.XactGranted, advisory.Wait(1500*time.Millisecond))
				expectUpdate42(m)
				m.ExpectCommit()
			},
			wantCode: codes.OK, wantCalled: true,
		},
		{
			name: "IDOutOfRange", method: methodPay, req: wrapperspb.Int64(1 << 40), expect: func(sqlmock.Sqlmock) {},
			wantCode: codes.InvalidArgument,
			wantMsg:  `grpclock: bad lock key: field "value" = "1099511627776": out of range [-2147483648, 2147483647]`,
		},
		{
			name: "IDMissing", method: methodPay, req: wrapperspb.Int64(0), expect: func(sqlmock.Sqlmock) {},
			wantCode: codes.InvalidArgument, wantMsg: `grpclock: bad lock key: field "value": unset`,
		},
		{
			name: "NameMissing", method: methodRename, req: wrapperspb.String(""), expect: func(sqlmock.Sqlmock) {},
			key:      grpclock.FieldNameKey(ordersNS, "value"),
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
			name: "BeginTooManyConnections", method: methodPay, req: wrapperspb.Int64(42),
			expect:   func(m sqlmock.Sqlmock) { m.ExpectBegin().WillReturnError(mock.ServerError("53300")) },
			wantCode: codes.Unavailable,
		},
		{
			name: "LockAdminShutdown", method: methodPay, req: wrapperspb.Int64(42),
			expect: func(m sqlmock.Sqlmock) {
				mock.ExpectWithXactLock(m, order42, mock.XactFailed, try).Lock.WillReturnError(mock.ServerError("57P01"))
			},
			wantCode: codes.Unavailable,
		},
		{
			name: "LockOtherError", method: methodPay, req: wrapperspb.Int64(42),
			expect: func(m sqlmock.Sqlmock) {
				mock.ExpectWithXactLock(m, order42, mock.XactFailed, try).Lock.WillReturnError(errSecret)
			},
			wantCode: codes.Internal, wantMsg: "grpclock: internal error",
		},
		{
			name: "CommitFails", method: methodPay, req: wrapperspb.Int64(42),
			expect:   func(m sqlmock.Sqlmock) { granted(m); m.ExpectCommit().WillReturnError(errSecret) },
			wantCode: codes.Internal, wantMsg: "grpclock: commit failed; the call's work was rolled back", wantCalled: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, m := mock.New(t, exact)
			tt.expect(m)
			called := false
			svc := &ordersService{unary: func(ctx context.Context, req proto.Message) error {
				called = true
				tx, ok := advisory.TxFromContext(ctx)
				if !ok {
					t.Error("no transaction in the handler's context")
					return nil
				}
				if _, err := tx.ExecContext(ctx, update42); err != nil {
					t.Error(err)
				}
				return tt.handlerErr
			}}
			key := tt.key
			if key == nil {
				key = grpclock.FieldKey(ordersNS, "value")
			}
			conn := startServer(t, svc, grpc.UnaryInterceptor(grpclock.UnaryServerInterceptor(db, key, tt.opts...)))
			err := conn.Invoke(context.Background(), tt.method, tt.req, new(wrapperspb.StringValue))
			s := status.Convert(err)
			if s.Code() != tt.wantCode {
				t.Errorf("code %v (%v), want %v", s.Code(), err, tt.wantCode)
			}
			if tt.wantMsg != "" && s.Message() != tt.wantMsg {
				t.Errorf("message %q, want %q", s.Message(), tt.wantMsg)
			}
			if leaks(s.Message()) {
				t.Errorf("message %q leaks a detail", s.Message())
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
	db, m := mock.New(t, exact)
	mock.ExpectWithXactLock(m, order42, mock.Rollback, advisory.Try())
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
// the matching code, and that the handler is not called.
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
			db, _ := mock.New(t, exact)
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

// TestUnaryNoLock checks that a key function returning ErrNoLock has the
// call served without a transaction and without the database.
func TestUnaryNoLock(t *testing.T) {
	t.Parallel()
	db, _ := mock.New(t, exact) // no expectations
	key := func(ctx context.Context, method string, req any) (advisory.Key, error) {
		return advisory.Key{}, grpclock.ErrNoLock
	}
	called := false
	// A transaction that an interceptor further out put in the context
	// must not show through.
	ctx := advisory.NewTxContext(context.Background(), &sql.Tx{})
	resp, err := grpclock.UnaryServerInterceptor(db, key)(ctx, wrapperspb.Int64(42), unaryInfo,
		func(ctx context.Context, req any) (any, error) {
			called = true
			if _, ok := advisory.TxFromContext(ctx); ok {
				t.Error("the handler got a transaction")
			}
			return "served", nil
		})
	if !called || err != nil || resp != "served" {
		t.Errorf("called %v, got %v, %v", called, resp, err)
	}
}
