package grpclock

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc/metadata"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/reqlock"
)

// MetadataKey returns a StreamKeyFunc that reads the incoming metadata
// entry name, such as "x-tenant", and returns advisory.NameKey(ns, value):
// the value is hashed with advisory.HashText. The entry must have exactly
// one value, not empty; otherwise the error matches httplock.ErrBadKey
// and the call fails with codes.InvalidArgument. Metadata names are
// case-insensitive.
//
// Because the value is hashed, MetadataKey(ns, "x-order-id") for "42" is
// not the key that [FieldKey] or [MetadataIDKey] gives id 42 in the same
// namespace, and a hash may equal some integer id: do not share a
// namespace between MetadataKey and integer ids. For integer ids use
// [MetadataIDKey] or [MetadataInt64Key].
//
// To lock a unary call on its metadata, adapt it:
//
//	key := grpclock.MetadataKey(ns, "x-tenant")
//	unaryKey := func(ctx context.Context, method string, _ any) (advisory.Key, error) { return key(ctx, method) }
//
// MetadataKey panics if name is empty.
func MetadataKey(ns int32, name string) StreamKeyFunc {
	name = metadataName("MetadataKey", name)
	return func(ctx context.Context, _ string) (advisory.Key, error) {
		v, err := metadataValue(ctx, name)
		if err != nil {
			return advisory.Key{}, err
		}
		return advisory.NameKey(ns, v), nil
	}
}

// MetadataIDKey returns a StreamKeyFunc that reads the incoming metadata
// entry name, such as "x-order-id", as a decimal int32 id and returns
// advisory.PairKey(ns, id): the key that [FieldKey](ns, ...) gives a unary
// call whose request holds the same id, so that streams and unary calls
// on one resource exclude each other. A missing, repeated or empty entry,
// one that is not a plain decimal integer, or an id outside the int32
// range is an error matching httplock.ErrBadKey.
//
// MetadataIDKey panics if name is empty.
func MetadataIDKey(ns int32, name string) StreamKeyFunc {
	name = metadataName("MetadataIDKey", name)
	return func(ctx context.Context, _ string) (advisory.Key, error) {
		id, err := metadataInt(ctx, name, 32)
		if err != nil {
			return advisory.Key{}, err
		}
		return advisory.PairKey(ns, int32(id)), nil
	}
}

// MetadataInt64Key is [MetadataIDKey] for an int64 id: it returns
// advisory.Int64Key(id), the key [FieldInt64Key] gives the same id.
//
// MetadataInt64Key panics if name is empty.
func MetadataInt64Key(name string) StreamKeyFunc {
	name = metadataName("MetadataInt64Key", name)
	return func(ctx context.Context, _ string) (advisory.Key, error) {
		id, err := metadataInt(ctx, name, 64)
		if err != nil {
			return advisory.Key{}, err
		}
		return advisory.Int64Key(id), nil
	}
}

// metadataName checks name, for the constructor fn, and returns it in
// lower case, as gRPC keeps metadata names.
func metadataName(fn, name string) string {
	if name == "" {
		panic("grpclock: " + fn + ": empty metadata name")
	}
	return strings.ToLower(name)
}

// metadataValue returns the one non-empty value of the incoming metadata
// entry name.
func metadataValue(ctx context.Context, name string) (string, error) {
	vals := metadata.ValueFromIncomingContext(ctx, name)
	what := fmt.Sprintf("metadata %q", name)
	switch {
	case len(vals) == 0 || (len(vals) == 1 && vals[0] == ""):
		return "", badKey(reqlock.Invalid(what, "", "missing"))
	case len(vals) > 1:
		return "", badKey(reqlock.Invalid(what, "", fmt.Sprintf("%d values, want one", len(vals))))
	}
	return vals[0], nil
}

// metadataInt returns the value of the incoming metadata entry name as a
// decimal integer of bits bits.
func metadataInt(ctx context.Context, name string, bits int) (int64, error) {
	v, err := metadataValue(ctx, name)
	if err != nil {
		return 0, err
	}
	id, err := reqlock.ParseInt(fmt.Sprintf("metadata %q", name), v, bits)
	if err != nil {
		return 0, badKey(err)
	}
	return id, nil
}
