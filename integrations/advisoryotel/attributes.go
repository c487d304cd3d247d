package advisoryotel

import (
	"context"
	"errors"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// The attributes an [Observer] sets besides OpenTelemetry's database
// semantic conventions (db.system.name, db.operation.name,
// db.response.status_code, error.type). Only [KeyAttr] and [KeysAttr]
// name keys, and they go on spans alone: metrics carry [NamespaceAttr],
// [ModeAttr], [LevelAttr] and [OutcomeAttr], whose values are few.
const (
	// KeyAttr is the key of a span about one lock, as advisory.Key's
	// String writes it: "42" or "7:1234".
	KeyAttr = attribute.Key("pgadvisory.lock.key")
	// KeysAttr lists the keys, in the order they were taken, of a span
	// about several locks taken or released together (LockKeys,
	// UnlockKeys); such a span has no KeyAttr.
	KeysAttr = attribute.Key("pgadvisory.lock.keys")
	// NamespaceAttr is the name of the keys' namespace, when the
	// registry of [WithRegistry] names it (for several keys, when they
	// all have that one).
	NamespaceAttr = attribute.Key("pgadvisory.lock.namespace")
	// ModeAttr is "exclusive" or "shared".
	ModeAttr = attribute.Key("pgadvisory.lock.mode")
	// LevelAttr is "session" for a session lock and "transaction" for a
	// transaction lock.
	LevelAttr = attribute.Key("pgadvisory.lock.level")
	// OutcomeAttr is how an acquisition ended, as advisory.Outcome's
	// String writes it: "acquired", "busy", "timeout", "deadlock" or
	// "error".
	OutcomeAttr = attribute.Key("pgadvisory.lock.outcome")
)

// The values of [ModeAttr] and [LevelAttr].
const (
	ModeExclusive    = "exclusive"
	ModeShared       = "shared"
	LevelSession     = "session"
	LevelTransaction = "transaction"
)

// mode returns ModeAttr's attribute for shared.
func mode(shared bool) attribute.KeyValue {
	if shared {
		return ModeAttr.String(ModeShared)
	}
	return ModeAttr.String(ModeExclusive)
}

// level returns LevelAttr's attribute for xact.
func level(xact bool) attribute.KeyValue {
	if xact {
		return LevelAttr.String(LevelTransaction)
	}
	return LevelAttr.String(LevelSession)
}

// releaseMode reports whether a release's operation says the lock was
// shared, and whether it says at all: "xact end" does not.
func releaseMode(op string) (shared, known bool) {
	if strings.HasPrefix(op, "unlock") {
		return strings.HasSuffix(op, "shared"), true
	}
	return false, false
}

// releaseXact reports whether a release's operation ends transaction
// locks.
func releaseXact(op string) bool { return strings.Contains(op, "xact") }

// keyAttrs appends the span attribute that names keys: KeyAttr for one,
// KeysAttr for several.
func keyAttrs(attrs []attribute.KeyValue, keys []advisory.Key) []attribute.KeyValue {
	switch len(keys) {
	case 0:
		return attrs
	case 1:
		return append(attrs, KeyAttr.String(keys[0].String()))
	}
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = k.String()
	}
	return append(attrs, KeysAttr.StringSlice(s))
}

// errAttrs appends what err says to a span's attributes: error.type, and
// db.response.status_code when the server answered with a SQLSTATE.
// error.type is that SQLSTATE, as the database conventions ask, else
// context.Canceled or context.DeadlineExceeded when the caller's context
// ended, else the error's Go type.
func errAttrs(attrs []attribute.KeyValue, err error) []attribute.KeyValue {
	var st interface{ SQLState() string }
	switch {
	case err == nil:
		return attrs
	case errors.As(err, &st) && st.SQLState() != "":
		return append(attrs, semconv.DBResponseStatusCode(st.SQLState()), semconv.ErrorTypeKey.String(st.SQLState()))
	case errors.Is(err, context.Canceled):
		return append(attrs, semconv.ErrorTypeKey.String("context.Canceled"))
	case errors.Is(err, context.DeadlineExceeded):
		return append(attrs, semconv.ErrorTypeKey.String("context.DeadlineExceeded"))
	}
	return append(attrs, semconv.ErrorType(err))
}
