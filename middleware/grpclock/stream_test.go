package grpclock_test

import (
	"context"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
	"github.com/pgadvisory/pgadvisory/middleware"
	"github.com/pgadvisory/pgadvisory/middleware/grpclock"
)

// tryOrder42 is the try-lock a stream for x-order-id: 42 sends: metadata is
// hashed.
var tryOrder42 = sqltext.TryLock(true, false, sqltext.PairArg(ordersNS, advisory.HashText("42")))

func TestStreamOutcomes(t *testing.T) {
	t.Parallel()
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
			expect: func(m sqlmock.Sqlmock) {
				m.ExpectBegin()
				m.ExpectExec(tryOrder42).WithoutArgs().WillReturnResult(rows(1))
				m.ExpectExec(update42).WillReturnResult(rows(1))
				m.ExpectCommit()
			},
			wantCode: codes.OK, wantMsgs: 2, wantCalled: true,
		},
		{
			name: "HandlerErrorRollsBack", md: []string{"x-order-id", "42"},
			handlerErr: status.Error(codes.FailedPrecondition, "order closed"),
			expect: func(m sqlmock.Sqlmock) {
				m.ExpectBegin()
				m.ExpectExec(tryOrder42).WithoutArgs().WillReturnResult(rows(1))
				m.ExpectExec(update42).WillReturnResult(rows(1))
				m.ExpectRollback()
			},
			wantCode: codes.FailedPrecondition, wantMsgs: 2, wantCalled: true,
		},
		{
			name: "NotAcquired", md: []string{"x-order-id", "42"},
			expect: func(m sqlmock.Sqlmock) {
				m.ExpectBegin()
				m.ExpectExec(tryOrder42).WithoutArgs().WillReturnResult(rows(0))
				m.ExpectRollback()
			},
			wantCode: codes.Aborted,
		},
		{
			name: "MetadataMissing", expect: func(sqlmock.Sqlmock) {},
			wantCode: codes.InvalidArgument,
		},
		{
			name: "MetadataTwice", md: []string{"x-order-id", "42", "x-order-id", "43"}, expect: func(sqlmock.Sqlmock) {},
			wantCode: codes.InvalidArgument,
		},
		{
			name: "CommitFails", md: []string{"x-order-id", "42"},
			expect: func(m sqlmock.Sqlmock) {
				m.ExpectBegin()
				m.ExpectExec(tryOrder42).WithoutArgs().WillReturnResult(rows(1))
				m.ExpectExec(update42).WillReturnResult(rows(1))
				m.ExpectCommit().WillReturnError(errSecret)
			},
			wantCode: codes.Internal, wantMsgs: 2, wantCalled: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, m := newMock(t)
			tt.expect(m)
			called := false
			svc := &ordersService{stream: func(ss grpc.ServerStream) error {
				called = true
				ctx := ss.Context()
				tx, ok := middleware.TxFromContext(ctx)
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
			if got := status.Code(err); got != tt.wantCode {
				t.Errorf("code %v (%v), want %v", got, err, tt.wantCode)
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
