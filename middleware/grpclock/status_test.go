package grpclock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/grpclock"
	"github.com/pgadvisory/pgadvisory/mock"
)

// TestKeyFuncStatus checks what a client learns of a key function's
// error: a status the error carries, the message of a bad-key error, and
// nothing of any other error.
func TestKeyFuncStatus(t *testing.T) {
	t.Parallel()
	errLookup := errors.New("secret: tenant lookup failed on host db-7")
	tests := []struct {
		name     string
		err      error
		wantCode codes.Code
		wantMsg  string
	}{
		{"Plain", errLookup, codes.InvalidArgument, "grpclock: invalid lock key"},
		{"Status", status.Error(codes.NotFound, "no such tenant"), codes.NotFound, "no such tenant"},
		{"WrappedStatus", fmt.Errorf("%v: %w", errLookup, status.Error(codes.PermissionDenied, "not yours")),
			codes.PermissionDenied, "not yours"},
		{"BadKey", fmt.Errorf("%w: tenant header missing", grpclock.ErrBadKey), codes.InvalidArgument,
			"grpclock: bad lock key: tenant header missing"},
		{"BadKeyHuge", fmt.Errorf("%w: %s", grpclock.ErrBadKey, strings.Repeat("x\xff", 1000)), codes.InvalidArgument, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, _ := mock.New(t, exact)
			key := func(context.Context, string, any) (advisory.Key, error) { return advisory.Key{}, tt.err }
			_, err := grpclock.UnaryServerInterceptor(db, key)(context.Background(), wrapperspb.Int64(42), unaryInfo,
				func(context.Context, any) (any, error) { t.Error("handler called"); return nil, nil })
			s, ok := status.FromError(err)
			if !ok || s.Code() != tt.wantCode {
				t.Fatalf("status %v (%v), want %v", s, ok, tt.wantCode)
			}
			if tt.wantMsg != "" && s.Message() != tt.wantMsg {
				t.Errorf("message %q, want %q", s.Message(), tt.wantMsg)
			}
			if len(s.Message()) > 300 || strings.Contains(s.Message(), "secret") || !utf8Valid(s.Message()) {
				t.Errorf("message %q is too long, invalid or leaks the cause", s.Message())
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("the key function's error is not reachable from %v", err)
			}
		})
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "") == s }

// TestFieldKeyMisconfigured checks that a key function that does not fit
// the method fails with Internal, telling the client nothing of Go types
// or methods, while the cause names them for the logs.
func TestFieldKeyMisconfigured(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		key   grpclock.KeyFunc
		req   any
		cause string
	}{
		{"NotProto", grpclock.FieldKey(1, "value"), "a string", "request string is not a proto message"},
		{"NoSuchField", grpclock.FieldKey(1, "id"), wrapperspb.Int64(1), `google.protobuf.Int64Value has no field "id"`},
		{"WrongKind", grpclock.FieldKey(1, "value"), wrapperspb.Bool(true), `field "value" is a bool`},
		{"Int64OnString", grpclock.FieldInt64Key("value"), wrapperspb.String("x"), `field "value" is a string`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, _ := mock.New(t, exact)
			_, err := grpclock.UnaryServerInterceptor(db, tt.key)(context.Background(), tt.req, unaryInfo,
				func(context.Context, any) (any, error) { t.Error("handler called"); return nil, nil })
			s := status.Convert(err)
			if s.Code() != codes.Internal || s.Message() != "grpclock: internal error" {
				t.Errorf("status %v, want Internal with a fixed message", s)
			}
			cause := errors.Unwrap(err)
			if cause == nil || !strings.Contains(cause.Error(), tt.cause) || !strings.Contains(cause.Error(), methodPay) {
				t.Errorf("cause %v, want one naming the method and %q", cause, tt.cause)
			}
		})
	}
}

// TestStatusErrorChain checks that a busy lock's error gives the client
// Aborted with a RetryInfo detail, and gives interceptors further out the
// cause, advisory.ErrNotAcquired.
func TestStatusErrorChain(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		opts      []grpclock.Option
		wantDelay time.Duration // 0: no RetryInfo
	}{
		{"Default", nil, time.Second},
		{"RetryAfter", []grpclock.Option{grpclock.RetryAfter(3 * time.Second)}, 3 * time.Second},
		{"NoRetryInfo", []grpclock.Option{grpclock.RetryAfter(0)}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, m := mock.New(t, exact)
			mock.ExpectWithXactLock(m, order42, mock.XactNotAcquired, advisory.Try())
			var outer error // what an interceptor further out saw
			record := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				resp, err := h(ctx, req)
				outer = err
				return resp, err
			}
			conn := startServer(t, &ordersService{unary: func(context.Context, proto.Message) error {
				t.Error("handler called")
				return nil
			}}, grpc.ChainUnaryInterceptor(record, grpclock.UnaryServerInterceptor(db, grpclock.FieldKey(ordersNS, "value"), tt.opts...)))

			err := pay(context.Background(), conn, 42)
			if !errors.Is(outer, advisory.ErrNotAcquired) {
				t.Errorf("the outer interceptor got %v, which does not match advisory.ErrNotAcquired", outer)
			}
			if s, ok := status.FromError(outer); !ok || s.Code() != codes.Aborted || leaks(s.Message()) {
				t.Errorf("the outer interceptor's status is %v, %v; want a clean Aborted", s, ok)
			}
			if leaks(outer.Error()) {
				t.Errorf("the error's text %q shows the cause", outer)
			}
			s := status.Convert(err)
			if s.Code() != codes.Aborted {
				t.Fatalf("client got %v, want Aborted", err)
			}
			var delays []time.Duration
			for _, d := range s.Details() {
				if ri, ok := d.(*errdetails.RetryInfo); ok {
					delays = append(delays, ri.GetRetryDelay().AsDuration())
				}
			}
			switch {
			case tt.wantDelay == 0 && len(delays) != 0:
				t.Errorf("RetryInfo %v sent although RetryAfter(0)", delays)
			case tt.wantDelay != 0 && (len(delays) != 1 || delays[0] != tt.wantDelay):
				t.Errorf("RetryInfo delays %v, want [%v]", delays, tt.wantDelay)
			}
		})
	}
}

// TestBuildPanics checks that bad configuration panics at build time,
// naming the package.
func TestBuildPanics(t *testing.T) {
	t.Parallel()
	db, _ := mock.New(t, exact)
	for name, build := range map[string]func(){
		"UnaryNilDB":            func() { grpclock.UnaryServerInterceptor(nil, grpclock.FieldKey(1, "id")) },
		"UnaryNilKey":           func() { grpclock.UnaryServerInterceptor(db, nil) },
		"StreamNilDB":           func() { grpclock.StreamServerInterceptor(nil, grpclock.MetadataNameKey(1, "x-id")) },
		"StreamNilKey":          func() { grpclock.StreamServerInterceptor(db, nil) },
		"NegativeWait":          func() { grpclock.Wait(-time.Second) },
		"WaitTooLong":           func() { grpclock.Wait(1 << 62) },
		"NegativeRetryAfter":    func() { grpclock.RetryAfter(-time.Second) },
		"BadFieldName":          func() { grpclock.FieldKey(1, "order-id") },
		"EmptyFieldName":        func() { grpclock.FieldKey(1, "") },
		"BadInt64FieldName":     func() { grpclock.FieldInt64Key("order id") },
		"BadNameFieldName":      func() { grpclock.FieldNameKey(1, "order.id") },
		"EmptyMetadataKey":      func() { grpclock.MetadataKey(1, "") },
		"EmptyMetadataNameKey":  func() { grpclock.MetadataNameKey(1, "") },
		"EmptyMetadataInt64Key": func() { grpclock.MetadataInt64Key("") },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			mustPanic(t, build)
		})
	}
}
