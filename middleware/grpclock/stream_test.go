package grpclock_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/grpclock"
	"github.com/pgadvisory/pgadvisory/mock"
)

func TestStreamOutcomes(t *testing.T) {
	t.Parallel()
	try := advisory.Try()
	granted := func(m sqlmock.Sqlmock) { mock.ExpectWithXactLock(m, order42, mock.XactGranted, try); expectUpdate42(m) }
	tests := []struct {
		name       string
		md         []string
		expect     func(m sqlmock.Sqlmock)
		handlerErr error
		wantCode   codes.Code
		wantMsgs   int
		wantCalled bool
	}{
		{
			name: "Commit", md: []string{"x-order-id", "42"},
			expect:   func(m sqlmock.Sqlmock) { granted(m); m.ExpectCommit() },
			wantCode: codes.OK, wantMsgs: 2, wantCalled: true,
		},
		{
			name: "HandlerErrorRollsBack", md: []string{"x-order-id", "42"},
			handlerErr: status.Error(codes.FailedPrecondition, "order closed"),
			expect:     func(m sqlmock.Sqlmock) { granted(m); m.ExpectRollback() },
			wantCode:   codes.FailedPrecondition, wantMsgs: 2, wantCalled: true,
		},
		{
			name: "NotAcquired", md: []string{"x-order-id", "42"},
			expect:   func(m sqlmock.Sqlmock) { mock.ExpectWithXactLock(m, order42, mock.XactNotAcquired, try) },
			wantCode: codes.Aborted,
		},
		{
			name: "MetadataMissing", expect: func(sqlmock.Sqlmock) {},
			wantCode: codes.InvalidArgument,
		},
		{
			name: "MetadataNotAnID", md: []string{"x-order-id", "forty-two"}, expect: func(sqlmock.Sqlmock) {},
			wantCode: codes.InvalidArgument,
		},
		{
			name: "MetadataTwice", md: []string{"x-order-id", "42", "x-order-id", "43"}, expect: func(sqlmock.Sqlmock) {},
			wantCode: codes.InvalidArgument,
		},
		{
			name: "CommitFails", md: []string{"x-order-id", "42"},
			expect:   func(m sqlmock.Sqlmock) { granted(m); m.ExpectCommit().WillReturnError(errSecret) },
			wantCode: codes.Internal, wantMsgs: 2, wantCalled: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, m := mock.New(t, exact)
			tt.expect(m)
			called := false
			svc := &ordersService{stream: func(ss grpc.ServerStream) error {
				called = true
				ctx := ss.Context()
				tx, ok := advisory.TxFromContext(ctx)
				if !ok {
					t.Error("no transaction in the stream's context")
					return nil
				}
				if _, err := tx.ExecContext(ctx, update42); err != nil {
					t.Error(err)
				}
				for _, v := range []string{"paid", "shipped"} {
					if err := ss.SendMsg(wrapperspb.String(v)); err != nil {
						return err
					}
				}
				return tt.handlerErr
			}}
			conn := startServer(t, svc, grpc.StreamInterceptor(
				grpclock.StreamServerInterceptor(db, grpclock.MetadataKey(ordersNS, "X-Order-ID"))))
			msgs, err := watch(context.Background(), conn, tt.md...)
			s := status.Convert(err)
			if s.Code() != tt.wantCode {
				t.Errorf("code %v (%v), want %v", s.Code(), err, tt.wantCode)
			}
			if leaks(s.Message()) {
				t.Errorf("message %q leaks a detail", s.Message())
			}
			if len(msgs) != tt.wantMsgs {
				t.Errorf("got %d messages, want %d", len(msgs), tt.wantMsgs)
			}
			if called != tt.wantCalled {
				t.Errorf("handler called: %v, want %v", called, tt.wantCalled)
			}
		})
	}
}

// fakeStream is a grpc.ServerStream with a context and nothing else, for
// calling the interceptor directly.
type fakeStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *fakeStream) Context() context.Context { return s.ctx }

// streamInfo is the info the server passes for Watch.
var streamInfo = &grpc.StreamServerInfo{FullMethod: methodWatch, IsServerStream: true}

// order42Stream is the context of a stream for x-order-id 42.
func order42Stream() *fakeStream {
	return &fakeStream{ctx: metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-order-id", "42"))}
}

// TestStreamPanic checks that a panicking stream handler's transaction is
// rolled back and that the panic continues. gRPC does not recover panics,
// so the interceptor is called directly.
func TestStreamPanic(t *testing.T) {
	t.Parallel()
	db, m := mock.New(t, exact)
	mock.ExpectWithXactLock(m, order42, mock.XactGranted, advisory.Try())
	expectUpdate42(m)
	m.ExpectRollback()
	interceptor := grpclock.StreamServerInterceptor(db, grpclock.MetadataKey(ordersNS, "x-order-id"))
	defer func() {
		if v := recover(); v != "boom" {
			t.Errorf("recovered %v, want boom", v)
		}
	}()
	interceptor(nil, order42Stream(), streamInfo, func(srv any, ss grpc.ServerStream) error {
		tx, _ := advisory.TxFromContext(ss.Context())
		if _, err := tx.ExecContext(ss.Context(), update42); err != nil {
			t.Error(err)
		}
		panic("boom")
	})
	t.Error("the panic did not continue")
}

// TestStreamNoLock checks that a stream key function returning ErrNoLock
// has the stream served without a transaction and without the database.
func TestStreamNoLock(t *testing.T) {
	t.Parallel()
	db, _ := mock.New(t, exact) // no expectations
	key := func(ctx context.Context, method string) (advisory.Key, error) {
		return advisory.Key{}, grpclock.ErrNoLock
	}
	ss := order42Stream()
	ss.ctx = advisory.NewTxContext(ss.ctx, &sql.Tx{}) // must not show through
	called := false
	err := grpclock.StreamServerInterceptor(db, key)(nil, ss, streamInfo, func(srv any, ss grpc.ServerStream) error {
		called = true
		if _, ok := advisory.TxFromContext(ss.Context()); ok {
			t.Error("the stream got a transaction")
		}
		if len(metadata.ValueFromIncomingContext(ss.Context(), "x-order-id")) != 1 {
			t.Error("the stream's context lost its metadata")
		}
		return nil
	})
	if !called || err != nil {
		t.Errorf("called %v, error %v", called, err)
	}
}
