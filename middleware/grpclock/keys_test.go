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
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/grpclock"
)

// checkKey checks a key function's answer: the key for codes.OK, an error
// matching grpclock.ErrBadKey for codes.InvalidArgument, else a status
// error with code.
func checkKey(t *testing.T, got advisory.Key, err error, want advisory.Key, code codes.Code) {
	t.Helper()
	switch code {
	case codes.OK:
		if err != nil || got != want {
			t.Fatalf("got %v, %v; want %v", got, err, want)
		}
	case codes.InvalidArgument:
		if !errors.Is(err, grpclock.ErrBadKey) {
			t.Fatalf("error %v, want one matching ErrBadKey", err)
		}
	default:
		if s, ok := status.FromError(err); !ok || s.Code() != code {
			t.Fatalf("error %v, want a status with %v", err, code)
		}
	}
	if err != nil && len(err.Error()) > 300 {
		t.Errorf("error message of %d bytes", len(err.Error()))
	}
}

func TestFieldKey(t *testing.T) {
	t.Parallel()
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
		{"ZeroUnsigned", "value", wrapperspb.UInt32(0), advisory.Key{}, codes.InvalidArgument},
		{"String", "value", wrapperspb.String("42"), advisory.Key{}, codes.Internal},
		{"Bytes", "value", wrapperspb.Bytes([]byte("42")), advisory.Key{}, codes.Internal},
		// A field of another well-known message type than the wrappers.
		{"DurationSeconds", "seconds", durationpb.New(42e9), advisory.PairKey(3, 42), codes.OK},
		{"DurationNanos", "nanos", &durationpb.Duration{Nanos: 9}, advisory.PairKey(3, 9), codes.OK},
		// Fields with explicit presence (proto2 optional): set to 0 or "",
		// Has reports them present, and they are still no key.
		{"PresentInt", "number", &descriptorpb.FieldDescriptorProto{Number: proto.Int32(42)}, advisory.PairKey(3, 42), codes.OK},
		{"PresentZeroInt", "number", &descriptorpb.FieldDescriptorProto{Number: proto.Int32(0)}, advisory.Key{}, codes.InvalidArgument},
		{"AbsentInt", "number", &descriptorpb.FieldDescriptorProto{}, advisory.Key{}, codes.InvalidArgument},
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
			checkKey(t, got, err, tt.want, tt.code)
		})
	}
}

func TestFieldInt64Key(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		field string
		req   any
		want  advisory.Key
		code  codes.Code
	}{
		{"Int64", "value", wrapperspb.Int64(1 << 40), advisory.Int64Key(1 << 40), codes.OK},
		{"Int64Min", "value", wrapperspb.Int64(math.MinInt64), advisory.Int64Key(math.MinInt64), codes.OK},
		{"Int32", "value", wrapperspb.Int32(-7), advisory.Int64Key(-7), codes.OK},
		{"UInt32", "value", wrapperspb.UInt32(math.MaxUint32), advisory.Int64Key(math.MaxUint32), codes.OK},
		{"UInt64Max", "value", wrapperspb.UInt64(math.MaxInt64), advisory.Int64Key(math.MaxInt64), codes.OK},
		{"UInt64AboveInt64", "value", wrapperspb.UInt64(math.MaxInt64 + 1), advisory.Key{}, codes.InvalidArgument},
		{"Zero", "value", wrapperspb.Int64(0), advisory.Key{}, codes.InvalidArgument},
		{"PresentZero", "negative_int_value", &descriptorpb.UninterpretedOption{NegativeIntValue: proto.Int64(0)}, advisory.Key{}, codes.InvalidArgument},
		{"PresentUInt64AboveInt64", "positive_int_value", &descriptorpb.UninterpretedOption{PositiveIntValue: proto.Uint64(math.MaxUint64)},
			advisory.Key{}, codes.InvalidArgument},
		{"PresentUInt64", "positive_int_value", &descriptorpb.UninterpretedOption{PositiveIntValue: proto.Uint64(5)}, advisory.Int64Key(5), codes.OK},
		{"String", "value", wrapperspb.String("42"), advisory.Key{}, codes.Internal},
		{"AbsentString", "name", &descriptorpb.FieldDescriptorProto{}, advisory.Key{}, codes.Internal},
		{"NoSuchField", "id", wrapperspb.Int64(1), advisory.Key{}, codes.Internal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := grpclock.FieldInt64Key(tt.field)(context.Background(), methodPay, tt.req)
			checkKey(t, got, err, tt.want, tt.code)
		})
	}
}

func TestFieldNameKey(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("x", 1<<20)
	tests := []struct {
		name  string
		field string
		req   any
		want  advisory.Key
		code  codes.Code
	}{
		{"String", "value", wrapperspb.String("acme"), advisory.NameKey(3, "acme"), codes.OK},
		{"StringDigits", "value", wrapperspb.String("42"), advisory.NameKey(3, "42"), codes.OK},
		{"NonUTF8Bytes", "value", wrapperspb.Bytes([]byte{0xff, 0xfe}), advisory.NameKey(3, "\xff\xfe"), codes.OK},
		{"Huge", "value", wrapperspb.String(huge), advisory.NameKey(3, huge), codes.OK},
		{"Empty", "value", wrapperspb.String(""), advisory.Key{}, codes.InvalidArgument},
		{"PresentEmpty", "name", &descriptorpb.FieldDescriptorProto{Name: proto.String("")}, advisory.Key{}, codes.InvalidArgument},
		{"Absent", "name", &descriptorpb.FieldDescriptorProto{}, advisory.Key{}, codes.InvalidArgument},
		{"Int", "value", wrapperspb.Int64(42), advisory.Key{}, codes.Internal},
		{"AbsentInt", "number", &descriptorpb.FieldDescriptorProto{}, advisory.Key{}, codes.Internal},
		{"NoSuchField", "id", wrapperspb.String("x"), advisory.Key{}, codes.Internal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := grpclock.FieldNameKey(3, tt.field)(context.Background(), methodPay, tt.req)
			checkKey(t, got, err, tt.want, tt.code)
		})
	}
}

func TestMetadataKeys(t *testing.T) {
	t.Parallel()
	name := grpclock.MetadataNameKey(3, "X-Order-ID")
	id := grpclock.MetadataKey(3, "X-Order-ID")
	id64 := grpclock.MetadataInt64Key("X-Order-ID")
	md := func(v ...string) metadata.MD { return metadata.MD{"x-order-id": v} }
	tests := []struct {
		name string
		key  grpclock.StreamKeyFunc
		md   metadata.MD
		want advisory.Key
		code codes.Code
	}{
		{"NameKey", name, md("acme"), advisory.NameKey(3, "acme"), codes.OK},
		{"NameKeyHashesDigits", name, md("42"), advisory.NameKey(3, "42"), codes.OK},
		{"NameKeyNonUTF8", name, md("\xff"), advisory.NameKey(3, "\xff"), codes.OK},
		{"NameKeyMissing", name, metadata.Pairs("x-other", "acme"), advisory.Key{}, codes.InvalidArgument},
		{"NameKeyNoMetadata", name, nil, advisory.Key{}, codes.InvalidArgument},
		{"NameKeyEmpty", name, md(""), advisory.Key{}, codes.InvalidArgument},
		{"NameKeyTwo", name, md("a", "b"), advisory.Key{}, codes.InvalidArgument},
		{"IDKey", id, md("42"), advisory.PairKey(3, 42), codes.OK},
		{"IDKeyNegative", id, md("-2147483648"), advisory.PairKey(3, math.MinInt32), codes.OK},
		{"IDKeyAboveInt32", id, md("2147483648"), advisory.Key{}, codes.InvalidArgument},
		{"IDKeyGarbage", id, md("42abc"), advisory.Key{}, codes.InvalidArgument},
		{"IDKeyZero", id, md("0"), advisory.Key{}, codes.InvalidArgument},
		{"IDKeyMinusZero", id, md("-0"), advisory.Key{}, codes.InvalidArgument},
		{"IDKeyPlus", id, md("+1"), advisory.Key{}, codes.InvalidArgument},
		{"IDKeyLeadingZeros", id, md("007"), advisory.Key{}, codes.InvalidArgument},
		{"IDKeyEmpty", id, md(""), advisory.Key{}, codes.InvalidArgument},
		{"IDKeyHuge", id, md(strings.Repeat("9", 1<<16)), advisory.Key{}, codes.InvalidArgument},
		{"IDKeyMissing", id, nil, advisory.Key{}, codes.InvalidArgument},
		{"IDKeyTwo", id, md("42", "43"), advisory.Key{}, codes.InvalidArgument},
		{"Int64Key", id64, md("9223372036854775807"), advisory.Int64Key(math.MaxInt64), codes.OK},
		{"Int64KeyOutOfRange", id64, md("9223372036854775808"), advisory.Key{}, codes.InvalidArgument},
		{"Int64KeyGarbage", id64, md("0x10"), advisory.Key{}, codes.InvalidArgument},
		{"Int64KeyZero", id64, md("0"), advisory.Key{}, codes.InvalidArgument},
		{"Int64KeyPlus", id64, md("+9"), advisory.Key{}, codes.InvalidArgument},
		{"Int64KeyLeadingZero", id64, md("09"), advisory.Key{}, codes.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			if tt.md != nil {
				ctx = metadata.NewIncomingContext(ctx, tt.md)
			}
			got, err := tt.key(ctx, methodWatch)
			checkKey(t, got, err, tt.want, tt.code)
		})
	}
}

// TestMetadataAndFieldKeysAgree checks that a stream locked with
// MetadataKey and a unary call locked with FieldKey take the same lock for
// the same id, and likewise the Int64Key and NameKey pairs, and that
// MetadataNameKey does not give the id's key: it hashes.
func TestMetadataAndFieldKeysAgree(t *testing.T) {
	t.Parallel()
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-order-id", "42"))
	field, _ := grpclock.FieldKey(ordersNS, "value")(context.Background(), methodPay, wrapperspb.Int64(42))
	field64, _ := grpclock.FieldInt64Key("value")(context.Background(), methodPay, wrapperspb.Int64(42))
	fieldName, _ := grpclock.FieldNameKey(ordersNS, "value")(context.Background(), methodPay, wrapperspb.String("42"))
	id, _ := grpclock.MetadataKey(ordersNS, "x-order-id")(ctx, methodWatch)
	id64, _ := grpclock.MetadataInt64Key("x-order-id")(ctx, methodWatch)
	hashed, _ := grpclock.MetadataNameKey(ordersNS, "x-order-id")(ctx, methodWatch)
	if field != id || field != order42 {
		t.Errorf("FieldKey gives %v and MetadataKey %v, want both %v", field, id, order42)
	}
	if fieldName != hashed || hashed != advisory.NameKey(ordersNS, "42") {
		t.Errorf("FieldNameKey gives %v and MetadataNameKey %v, want both NameKey(ns, \"42\")", fieldName, hashed)
	}
	if field64 != id64 || id64 != advisory.Int64Key(42) {
		t.Errorf("FieldInt64Key gives %v and MetadataInt64Key %v, want both 42", field64, id64)
	}
	if hashed == id {
		t.Error("MetadataNameKey gave the integer key; it should hash")
	}
}
