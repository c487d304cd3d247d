package grpclock

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/internal/reqlock"
)

// A KeyFunc returns the lock key of a unary call from its context, its full
// method name ("/package.Service/Method") and its request message. An
// error fails the call before any transaction begins, except
// [ErrNoLock], which has the call served at once without a transaction
// or a lock (advisory.TxFromContext then reports false).
// The client gets:
//
//   - for an error that carries a gRPC status (made with status.Error,
//     possibly wrapped), that status, code and message as they are;
//   - for an error matching [ErrBadKey], codes.InvalidArgument
//     with the error's message, cut to 256 bytes: keep secrets out of it;
//   - for any other error, codes.InvalidArgument with a fixed message.
//
// The error itself stays reachable from the returned error with errors.Is
// and errors.As, for logs.
type KeyFunc func(ctx context.Context, fullMethod string, req any) (advisory.Key, error)

// A StreamKeyFunc returns the lock key of a streaming call from its context,
// which carries the incoming metadata, and its full method name. Its errors
// are treated as a [KeyFunc]'s are.
type StreamKeyFunc func(ctx context.Context, fullMethod string) (advisory.Key, error)

// FieldKey returns a KeyFunc that reads the top-level integer field named
// field (its name in the .proto file, such as "order_id") of the request
// message, through protoreflect, so it works with any generated message,
// and gives advisory.PairKey(ns, id): the key that [MetadataKey] gives a
// stream whose metadata holds the same id. The id is checked as the
// package documentation's Keys section says: an unset field, 0, or a
// value out of the int32 range is an error matching [ErrBadKey], and the
// call fails with codes.InvalidArgument.
//
// A request type without the field, or a field that is not a singular
// integer, is a mistake in the server and fails the call with
// codes.Internal; the details are in the error's cause, not in the
// client's message. For a string field that names a resource, use
// [FieldNameKey].
//
// FieldKey panics if field is not a valid proto field name.
func FieldKey(ns int32, field string) KeyFunc {
	name := fieldName("FieldKey", field)
	return func(_ context.Context, fullMethod string, req any) (advisory.Key, error) {
		id, err := fieldInt(fullMethod, "FieldKey", req, name, 32)
		if err != nil {
			return advisory.Key{}, err
		}
		return advisory.PairKey(ns, int32(id)), nil
	}
}

// FieldInt64Key is [FieldKey] for an int64 id: it gives
// advisory.Int64Key(id), the key [MetadataInt64Key] gives the same id.
// Every integer kind is read; an unsigned value above math.MaxInt64 is an
// error matching [ErrBadKey], as are an unset field and 0.
//
// FieldInt64Key panics if field is not a valid proto field name.
func FieldInt64Key(field string) KeyFunc {
	name := fieldName("FieldInt64Key", field)
	return func(_ context.Context, fullMethod string, req any) (advisory.Key, error) {
		id, err := fieldInt(fullMethod, "FieldInt64Key", req, name, 64)
		if err != nil {
			return advisory.Key{}, err
		}
		return advisory.Int64Key(id), nil
	}
}

// FieldNameKey returns a KeyFunc that reads the top-level string or bytes
// field named field of the request message, as [FieldKey] does, and gives
// advisory.NameKey(ns, value), the key that
// pg_advisory_xact_lock(ns, hashtext(value)) takes, and that
// [MetadataNameKey] gives a stream whose metadata holds the same name. An
// unset or empty field is an error matching [ErrBadKey]. A field of
// another kind fails the call with codes.Internal.
//
// FieldNameKey panics if field is not a valid proto field name.
func FieldNameKey(ns int32, field string) KeyFunc {
	name := fieldName("FieldNameKey", field)
	return func(_ context.Context, fullMethod string, req any) (advisory.Key, error) {
		fd, v, err := fieldValue(fullMethod, "FieldNameKey", req, name, isText, "a string or bytes")
		if err != nil {
			return advisory.Key{}, err
		}
		s := v.String()
		if fd.Kind() == protoreflect.BytesKind {
			s = string(v.Bytes())
		}
		if err := reqlock.CheckName(fieldWhat(name), s); err != nil {
			return advisory.Key{}, badKey(err)
		}
		return advisory.NameKey(ns, s), nil
	}
}

// fieldName checks field, for the constructor fn.
func fieldName(fn, field string) protoreflect.Name {
	name := protoreflect.Name(field)
	if !name.IsValid() {
		panic(fmt.Sprintf("grpclock: %s: %q is not a proto field name", fn, field))
	}
	return name
}

// fieldValue returns the descriptor and the value of the set, singular
// field name of req, a proto message, for the key function fn, which
// reads fields of the kinds that fits reports, described as want.
func fieldValue(fullMethod, fn string, req any, name protoreflect.Name,
	fits func(protoreflect.Kind) bool, want string) (protoreflect.FieldDescriptor, protoreflect.Value, error) {
	m, ok := req.(proto.Message)
	if !ok {
		return nil, protoreflect.Value{}, misconfigured(fmt.Errorf("%s: request %T is not a proto message", fullMethod, req))
	}
	msg := m.ProtoReflect()
	fd := msg.Descriptor().Fields().ByName(name)
	switch {
	case fd == nil:
		return nil, protoreflect.Value{}, misconfigured(fmt.Errorf("%s: %s has no field %q", fullMethod, msg.Descriptor().FullName(), name))
	case fd.Cardinality() == protoreflect.Repeated:
		return nil, protoreflect.Value{}, misconfigured(fmt.Errorf("%s: %s: field %q is repeated", fn, fullMethod, name))
	case !fits(fd.Kind()):
		return nil, protoreflect.Value{}, misconfigured(fmt.Errorf("%s: %s: field %q is a %s, not %s",
			fn, fullMethod, name, fd.Kind(), want))
	case !msg.Has(fd):
		return nil, protoreflect.Value{}, badKey(reqlock.Invalid(fieldWhat(name), "", "unset"))
	}
	return fd, msg.Get(fd), nil
}

// fieldWhat names the field name in errors.
func fieldWhat(name protoreflect.Name) string { return fmt.Sprintf("field %q", name) }

// fieldInt returns the integer field name of req, for the key function
// fn, as an id of bits bits.
func fieldInt(fullMethod, fn string, req any, name protoreflect.Name, bits int) (int64, error) {
	fd, v, err := fieldValue(fullMethod, fn, req, name, isInteger, "an integer")
	if err != nil {
		return 0, err
	}
	if isUnsigned(fd.Kind()) {
		id, err := reqlock.CheckUintID(fieldWhat(name), v.Uint(), bits)
		if err != nil {
			return 0, badKey(err)
		}
		return id, nil
	}
	if err := reqlock.CheckID(fieldWhat(name), v.Int(), bits); err != nil {
		return 0, badKey(err)
	}
	return v.Int(), nil
}

func isInteger(k protoreflect.Kind) bool { return isSigned(k) || isUnsigned(k) }

func isText(k protoreflect.Kind) bool {
	return k == protoreflect.StringKind || k == protoreflect.BytesKind
}

func isSigned(k protoreflect.Kind) bool {
	switch k {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return true
	}
	return false
}

func isUnsigned(k protoreflect.Kind) bool {
	switch k {
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return true
	}
	return false
}

// misconfigured reports a key function that does not fit the method it
// serves: codes.Internal for the client, the details in the cause.
func misconfigured(err error) error {
	return fail(codes.Internal, msgInternal, fmt.Errorf("grpclock: %w", err))
}
