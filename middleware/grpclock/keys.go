package grpclock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// ErrBadKey is matched by the errors of [FieldKey] and [MetadataKey] for a
// call that names no key, such as a missing field or an id out of range.
// The interceptors answer them with codes.InvalidArgument.
var ErrBadKey = errors.New("grpclock: bad lock key")

// A KeyFunc returns the lock key of a unary call from its context, its full
// method name ("/package.Service/Method") and its request message. An
// error fails the call before any transaction begins: with its own status
// if it carries one (made with status.Error), else with
// codes.InvalidArgument and the error's message.
type KeyFunc func(ctx context.Context, fullMethod string, req any) (advisory.Key, error)

// A StreamKeyFunc returns the lock key of a streaming call from its context,
// which carries the incoming metadata, and its full method name. Errors are
// treated as a [KeyFunc]'s are.
type StreamKeyFunc func(ctx context.Context, fullMethod string) (advisory.Key, error)

// FieldKey returns a KeyFunc that reads the field named field (its name in
// the .proto file, such as "order_id") of the request message, through
// protoreflect, so it works with any generated message:
//
//   - an integer field gives advisory.PairKey(ns, id); the value must fit
//     in an int32;
//   - a string or bytes field gives advisory.NameKey(ns, value), the key
//     that pg_advisory_xact_lock(ns, hashtext(value)) takes.
//
// A field that is unset, or holds its zero value (0 or ""), or an integer
// out of the int32 range, is an error matching [ErrBadKey]: the call fails
// with codes.InvalidArgument. A request type without the field, or a field
// of another kind, is a mistake in the server, and fails the call with
// codes.Internal.
//
// FieldKey panics if field is not a valid proto field name.
func FieldKey(ns int32, field string) KeyFunc {
	name := protoreflect.Name(field)
	if !name.IsValid() {
		panic(fmt.Sprintf("grpclock: FieldKey: %q is not a proto field name", field))
	}
	return func(_ context.Context, fullMethod string, req any) (advisory.Key, error) {
		m, ok := req.(proto.Message)
		if !ok {
			return advisory.Key{}, status.Errorf(codes.Internal, "grpclock: FieldKey: %s: request %T is not a proto message", fullMethod, req)
		}
		msg := m.ProtoReflect()
		fd := msg.Descriptor().Fields().ByName(name)
		if fd == nil {
			return advisory.Key{}, status.Errorf(codes.Internal, "grpclock: FieldKey: %s: %s has no field %q",
				fullMethod, msg.Descriptor().FullName(), field)
		}
		if fd.Cardinality() == protoreflect.Repeated {
			return advisory.Key{}, status.Errorf(codes.Internal, "grpclock: FieldKey: %s: field %q is repeated", fullMethod, field)
		}
		if !msg.Has(fd) {
			return advisory.Key{}, fmt.Errorf("%w: field %q is unset or zero", ErrBadKey, field)
		}
		v := msg.Get(fd)
		switch fd.Kind() {
		case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
			protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
			id := v.Int()
			if id < math.MinInt32 || id > math.MaxInt32 {
				return advisory.Key{}, fmt.Errorf("%w: field %q = %d: out of range [%d, %d]", ErrBadKey, field, id, math.MinInt32, math.MaxInt32)
			}
			return advisory.PairKey(ns, int32(id)), nil
		case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
			id := v.Uint()
			if id > math.MaxInt32 {
				return advisory.Key{}, fmt.Errorf("%w: field %q = %d: out of range [0, %d]", ErrBadKey, field, id, math.MaxInt32)
			}
			return advisory.PairKey(ns, int32(id)), nil
		case protoreflect.StringKind:
			return advisory.NameKey(ns, v.String()), nil
		case protoreflect.BytesKind:
			return advisory.NameKey(ns, string(v.Bytes())), nil
		}
		return advisory.Key{}, status.Errorf(codes.Internal, "grpclock: FieldKey: %s: field %q is a %s, not an integer or a string",
			fullMethod, field, fd.Kind())
	}
}

// MetadataKey returns a StreamKeyFunc that reads the incoming metadata
// entry name, such as "x-order-id", and returns advisory.NameKey(ns,
// value). The entry must have exactly one value, not empty; otherwise the
// error matches [ErrBadKey] and the call fails with codes.InvalidArgument.
// Metadata names are case-insensitive.
//
// To lock a unary call on its metadata, adapt it:
//
//	key := grpclock.MetadataKey(ns, "x-tenant")
//	unaryKey := func(ctx context.Context, method string, _ any) (advisory.Key, error) { return key(ctx, method) }
//
// MetadataKey panics if name is empty.
func MetadataKey(ns int32, name string) StreamKeyFunc {
	if name == "" {
		panic("grpclock: MetadataKey: empty metadata name")
	}
	name = strings.ToLower(name)
	return func(ctx context.Context, _ string) (advisory.Key, error) {
		vals := metadata.ValueFromIncomingContext(ctx, name)
		switch {
		case len(vals) == 0 || (len(vals) == 1 && vals[0] == ""):
			return advisory.Key{}, fmt.Errorf("%w: metadata %q is missing", ErrBadKey, name)
		case len(vals) > 1:
			return advisory.Key{}, fmt.Errorf("%w: metadata %q has %d values, want one", ErrBadKey, name, len(vals))
		}
		return advisory.NameKey(ns, vals[0]), nil
	}
}
