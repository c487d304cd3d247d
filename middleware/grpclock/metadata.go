package grpclock

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc/metadata"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/internal/reqlock"
)

// MetadataKey returns a StreamKeyFunc that reads the incoming metadata
// entry name, such as "x-order-id", as an int32 id and returns
// advisory.PairKey(ns, id): the key that [FieldKey](ns, ...) gives a unary
// call whose request holds the same id, so that streams and unary calls
// on one resource exclude each other. The entry must have exactly one
// value, an id as the package documentation's Keys section says; a
// missing, repeated or malformed entry is an error matching [ErrBadKey],
// and the call fails with codes.InvalidArgument. Metadata names are
// case-insensitive.
//
// To lock a unary call on its metadata, adapt it:
//
//	key := grpclock.MetadataKey(ns, "x-order-id")
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
		k, err := reqlock.Key(ns, metadataWhat(name), v)
		if err != nil {
			return advisory.Key{}, badKey(err)
		}
		return k, nil
	}
}

// MetadataInt64Key is [MetadataKey] for an int64 id: it returns
// advisory.Int64Key(id), the key [FieldInt64Key] gives the same id.
//
// MetadataInt64Key panics if name is empty.
func MetadataInt64Key(name string) StreamKeyFunc {
	name = metadataName("MetadataInt64Key", name)
	return func(ctx context.Context, _ string) (advisory.Key, error) {
		v, err := metadataValue(ctx, name)
		if err != nil {
			return advisory.Key{}, err
		}
		k, err := reqlock.Int64Key(metadataWhat(name), v)
		if err != nil {
			return advisory.Key{}, badKey(err)
		}
		return k, nil
	}
}

// MetadataNameKey returns a StreamKeyFunc that reads the incoming metadata
// entry name, such as "x-tenant", and returns advisory.NameKey(ns, value),
// the key [FieldNameKey] gives the same name: the value is hashed with
// advisory.HashText. The entry must have exactly one value, not empty;
// otherwise the error matches [ErrBadKey].
//
// MetadataNameKey panics if name is empty.
func MetadataNameKey(ns int32, name string) StreamKeyFunc {
	name = metadataName("MetadataNameKey", name)
	return func(ctx context.Context, _ string) (advisory.Key, error) {
		v, err := metadataValue(ctx, name)
		if err != nil {
			return advisory.Key{}, err
		}
		return advisory.NameKey(ns, v), nil
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

// metadataWhat names the metadata entry name in errors.
func metadataWhat(name string) string { return fmt.Sprintf("metadata %q", name) }

// metadataValue returns the one non-empty value of the incoming metadata
// entry name.
func metadataValue(ctx context.Context, name string) (string, error) {
	vals := metadata.ValueFromIncomingContext(ctx, name)
	switch {
	case len(vals) > 1:
		return "", badKey(reqlock.Invalid(metadataWhat(name), "", fmt.Sprintf("%d values, want one", len(vals))))
	case len(vals) == 0:
		return "", badKey(reqlock.Invalid(metadataWhat(name), "", "missing"))
	}
	if err := reqlock.CheckName(metadataWhat(name), vals[0]); err != nil {
		return "", badKey(err)
	}
	return vals[0], nil
}
