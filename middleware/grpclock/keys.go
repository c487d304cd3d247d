package grpclock

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/reqlock"
	"github.com/pgadvisory/pgadvisory/middleware/httplock"
)

// A KeyFunc returns the lock key of a unary call from its context, its full
// method name ("/package.Service/Method") and its request message. An
// error fails the call before any transaction begins, except
// httplock.ErrNoLock, which has the call served at once without a
// transaction or a lock (advisory.TxFromContext then reports false).
// The client gets:
//
//   - for an error that carries a gRPC status (made with status.Error,
//     possibly wrapped), that status, code and message as they are;
//   - for an error matching httplock.ErrBadKey, codes.InvalidArgument
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

// FieldKey returns a KeyFunc that reads the top-level field named field
// (its name in the .proto file, such as "order_id") of the request
// message, through protoreflect, so it works with any generated message:
//
//   - an integer field gives advisory.PairKey(ns, id); the value must fit
//     in an int32;
//   - a string or bytes field gives advisory.NameKey(ns, value), the key
//     that pg_advisory_xact_lock(ns, hashtext(value)) takes.
//
// A field that is unset or holds 0 or "" (whether or not the field tracks
// presence), or an integer out of the int32 range, is an error matching
// httplock.ErrBadKey: the call fails with codes.InvalidArgument. A
// request type without the field, or a field of another kind, is a
// mistake in the server, and fails the call with codes.Internal; the
// details are in the error's cause, not in the client's message.
//
// FieldKey panics if field is not a valid proto field name.
func FieldKey(ns int32, field string) KeyFunc {
	name := fieldName("FieldKey", field)
	return func(_ context.Context, fullMethod string, req any) (advisory.Key, error) {
		fd, v, err := fieldValue(fullMethod, req, name)
		if err != nil {
			return advisory.Key{}, err
		}
		switch kind := fd.Kind(); {
		case isSigned(kind), isUnsigned(kind):
			id, err := fieldInt(fd, v, field, math.MinInt32, math.MaxInt32)
			if err != nil {
				return advisory.Key{}, err
			}
			return advisory.PairKey(ns, int32(id)), nil
		case kind == protoreflect.StringKind, kind == protoreflect.BytesKind:
			s := v.String()
			if kind == protoreflect.BytesKind {
				s = string(v.Bytes())
			}
			if s == "" {
				return advisory.Key{}, badKey(reqlock.Invalid(fmt.Sprintf("field %q", field), "", "empty"))
			}
			return advisory.NameKey(ns, s), nil
		}
		return advisory.Key{}, misconfigured(fmt.Errorf("FieldKey: %s: field %q is a %s, not an integer or a string",
			fullMethod, field, fd.Kind()))
	}
}

// FieldInt64Key returns a KeyFunc that reads the top-level integer field
// named field of the request message, as [FieldKey] does, and gives
// advisory.Int64Key(id): for int64, uint32 and the other integer kinds.
// An unsigned value above math.MaxInt64 is an error matching
// httplock.ErrBadKey, as are an unset field and 0. A field of another
// kind fails the call with codes.Internal.
//
// FieldInt64Key panics if field is not a valid proto field name.
func FieldInt64Key(field string) KeyFunc {
	name := fieldName("FieldInt64Key", field)
	return func(_ context.Context, fullMethod string, req any) (advisory.Key, error) {
		fd, v, err := fieldValue(fullMethod, req, name)
		if err != nil {
			return advisory.Key{}, err
		}
		if kind := fd.Kind(); !isSigned(kind) && !isUnsigned(kind) {
			return advisory.Key{}, misconfigured(fmt.Errorf("FieldInt64Key: %s: field %q is a %s, not an integer",
				fullMethod, field, kind))
		}
		id, err := fieldInt(fd, v, field, math.MinInt64, math.MaxInt64)
		if err != nil {
			return advisory.Key{}, err
		}
		return advisory.Int64Key(id), nil
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
// field name of req, a proto message.
func fieldValue(fullMethod string, req any, name protoreflect.Name) (protoreflect.FieldDescriptor, protoreflect.Value, error) {
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
		return nil, protoreflect.Value{}, misconfigured(fmt.Errorf("%s: field %q is repeated", fullMethod, name))
	case !msg.Has(fd):
		return nil, protoreflect.Value{}, badKey(reqlock.Invalid(fmt.Sprintf("field %q", name), "", "unset"))
	}
	return fd, msg.Get(fd), nil
}

// fieldInt returns the integer v of field, which must be nonzero and in
// [lo, hi].
func fieldInt(fd protoreflect.FieldDescriptor, v protoreflect.Value, field string, lo, hi int64) (int64, error) {
	what := fmt.Sprintf("field %q", field)
	if isUnsigned(fd.Kind()) {
		u := v.Uint()
		if u > uint64(hi) {
			return 0, badKey(reqlock.Invalid(what, strconv.FormatUint(u, 10), fmt.Sprintf("out of range [0, %d]", hi)))
		}
		v = protoreflect.ValueOfInt64(int64(u))
	}
	id := v.Int()
	switch {
	case id == 0:
		return 0, badKey(reqlock.Invalid(what, "", "zero"))
	case id < lo || id > hi:
		return 0, badKey(reqlock.Invalid(what, strconv.FormatInt(id, 10), fmt.Sprintf("out of range [%d, %d]", lo, hi)))
	}
	return id, nil
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

// badKey makes err, which says why a call names no key, match
// httplock.ErrBadKey.
func badKey(err error) error { return fmt.Errorf("%w: %w", httplock.ErrBadKey, err) }

// misconfigured reports a key function that does not fit the method it
// serves: codes.Internal for the client, the details in the cause.
func misconfigured(err error) error {
	return fail(codes.Internal, msgInternal, fmt.Errorf("grpclock: %w", err))
}
