package grpclock_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/grpclock"
)

func TestFieldKey(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("x", 1<<20)
	tests := []struct {
		name  string
		field string
		req   any
		want  advisory.Key
		code  codes.Code // of the error; codes.OK for none
	}{
		{"Int32", "value", wrapperspb.Int32(-5), advisory.PairKey(3, -5), codes.OK},
		{"Int64", "value", wrapperspb.Int64(math.MaxInt32), advisory.PairKey(3, math.MaxInt32), codes.OK},
		{"Int64Min", "value", wrapperspb.Int64(math.MinInt32), advisory.PairKey(3, math.MinInt32), codes.OK},
		{"Int64AboveInt32", "value", wrapperspb.Int64(math.MaxInt32 + 1), advisory.Key{}, codes.InvalidArgument},
		{"Int64BelowInt32", "value", wrapperspb.Int64(math.MinInt32 - 1), advisory.Key{}, codes.InvalidArgument},
		{"UInt32", "value", wrapperspb.UInt32(7), advisory.PairKey(3, 7), codes.OK},
		{"UInt32AboveInt32", "value", wrapperspb.UInt32(math.MaxUint32), advisory.Key{}, codes.InvalidArgument},
		{"UInt64AboveInt32", "value", wrapperspb.UInt64(math.MaxUint64), advisory.Key{}, codes.InvalidArgument},
		{"Zero", "value", wrapperspb.Int64(0), advisory.Key{}, codes.InvalidArgument},
		{"String", "value", wrapperspb.String("acme"), advisory.NameKey(3, "acme"), codes.OK},
		{"StringNonUTF8Bytes", "value", wrapperspb.Bytes([]byte{0xff, 0xfe}), advisory.NameKey(3, "\xff\xfe"), codes.OK},
		{"StringHuge", "value", wrapperspb.String(huge), advisory.NameKey(3, huge), codes.OK},
		{"StringEmpty", "value", wrapperspb.String(""), advisory.Key{}, codes.InvalidArgument},
		{"NestedMessageField", "seconds", durationpb.New(42e9), advisory.PairKey(3, 42), codes.OK},
		{"Nanos", "nanos", &durationpb.Duration{Nanos: 9}, advisory.PairKey(3, 9), codes.OK},
		{"NilMessage", "value", (*wrapperspb.Int64Value)(nil), advisory.Key{}, codes.InvalidArgument},
		{"NoSuchField", "id", wrapperspb.Int64(1), advisory.Key{}, codes.Internal},
		{"Bool", "value", wrapperspb.Bool(true), advisory.Key{}, codes.Internal},
		{"Map", "fields", &structpb.Struct{Fields: map[string]*structpb.Value{"a": structpb.NewNullValue()}}, advisory.Key{}, codes.Internal},
		{"NotProto", "value", "a string", advisory.Key{}, codes.Internal},
		{"NilRequest", "value", nil, advisory.Key{}, codes.Internal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := grpclock.FieldKey(3, tt.field)(context.Background(), methodPay, tt.req)
			switch {
			case tt.code == codes.OK:
				if err != nil || got != tt.want {
					t.Fatalf("got %v, %v; want %v", got, err, tt.want)
				}
			case tt.code == codes.InvalidArgument:
				if !errors.Is(err, grpclock.ErrBadKey) {
					t.Fatalf("error %v, want one matching ErrBadKey", err)
				}
			default:
				if s, ok := status.FromError(err); !ok || s.Code() != tt.code {
					t.Fatalf("error %v, want a status with %v", err, tt.code)
				}
			}
			if err != nil && len(err.Error()) > 300 {
				t.Errorf("error message of %d bytes", len(err.Error()))
			}
		})
	}
}

func TestMetadataKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		md      metadata.MD
		want    advisory.Key
		wantErr bool
	}{
		{"One", metadata.Pairs("x-tenant", "acme"), advisory.NameKey(3, "acme"), false},
		{"NonUTF8", metadata.MD{"x-tenant": {"\xff"}}, advisory.NameKey(3, "\xff"), false},
		{"Missing", metadata.Pairs("x-other", "acme"), advisory.Key{}, true},
		{"NoMetadata", nil, advisory.Key{}, true},
		{"Empty", metadata.Pairs("x-tenant", ""), advisory.Key{}, true},
		{"Two", metadata.Pairs("x-tenant", "a", "x-tenant", "b"), advisory.Key{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			if tt.md != nil {
				ctx = metadata.NewIncomingContext(ctx, tt.md)
			}
			got, err := grpclock.MetadataKey(3, "X-Tenant")(ctx, methodWatch)
			if tt.wantErr {
				if !errors.Is(err, grpclock.ErrBadKey) {
					t.Fatalf("error %v, want one matching ErrBadKey", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}
