package keyspace

import (
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// The IDs from ReservedMinID to ReservedMaxID belong to this library, as
// does the name "pgadvisory"; [Registry.Register] refuses them. Today the
// library uses one of them, ReservedMinID, named "pgadvisory": its key
// PairKey(ReservedMinID, 1) serialises [Registry.Sync]. The rest are kept
// for the library's future use.
const (
	ReservedMinID int32 = math.MinInt32       // the lowest reserved ID, the library's own namespace
	ReservedMaxID int32 = math.MinInt32 + 255 // the highest reserved ID
)

// libraryNamespace is the namespace of the library's own keys. Its Doc is
// written to the dictionary table, so it keeps its wording.
var libraryNamespace = advisory.Namespace{
	ID:    ReservedMinID,
	Name:  "pgadvisory",
	Owner: "github.com/pgadvisory/pgadvisory",
	Doc:   "keys the pgadvisory library takes for itself; 1 serialises Registry.Sync",
}

// syncKey is the lock that serialises Registry.Sync across processes.
var syncKey = libraryNamespace.Key(1)

// isReserved reports whether ns claims an ID or a name of the library.
func isReserved(ns advisory.Namespace) bool {
	return ns.ID <= ReservedMaxID || ns.Name == libraryNamespace.Name
}

// describe renders a namespace for an error message:
// `7 "billing" (owner team-a)`.
func describe(ns advisory.Namespace) string {
	s := strconv.FormatInt(int64(ns.ID), 10) + " " + strconv.Quote(ns.Name)
	if ns.Owner != "" {
		s += " (owner " + ns.Owner + ")"
	}
	return s
}

// Errors about namespaces. Match them with [errors.Is].
var (
	// ErrConflict means a namespace's ID or name already belongs to
	// another namespace. The error is a [*ConflictError], which names
	// both.
	ErrConflict = errors.New("keyspace: namespace conflict")

	// ErrReserved means a namespace claims an ID from [ReservedMinID] to
	// [ReservedMaxID], or the name "pgadvisory", which belong to this
	// library.
	ErrReserved = errors.New("keyspace: namespace reserved for the pgadvisory library")

	// ErrNoNamespace means a key belongs to no known namespace: either it
	// is a bigint key ([advisory.Int64Key]), which never belongs to one,
	// or no namespace has its first half as ID.
	ErrNoNamespace = errors.New("keyspace: no namespace")

	// errNoName is returned for a namespace without a name.
	errNoName = errors.New("keyspace: namespace has no name")
)

// A ConflictError reports a namespace that cannot be registered because
// another one already has its ID or its name, or, within one [Registry],
// has both its ID and its name but another Owner or Doc: one process must
// not declare the same namespace twice in two different ways. (Across
// processes, [Registry.Sync] treats a row with the same ID and name as the
// same namespace and reports no conflict.) It matches [ErrConflict].
type ConflictError struct {
	// Namespace is the one being registered.
	Namespace advisory.Namespace
	// Existing is the one that holds the ID or the name.
	Existing advisory.Namespace
	// RegisteredBy is who recorded Existing in the dictionary table,
	// when [Registry.Sync] found the conflict there, and "" otherwise.
	RegisteredBy string
}

// Error describes the conflict. For a namespace registered twice with
// the same ID and name it reads
// `keyspace: namespace 7 "billing" registered twice with different owner or doc: owner "team-a" vs "team-b"`;
// otherwise it names the ID or name already taken, the namespace that
// holds it and the one that cannot be registered:
// `keyspace: namespace conflict: ID 7 is already 7 "billing" (owner team-a); cannot register 7 "invoices"`.
func (e *ConflictError) Error() string {
	if e.Existing.ID == e.Namespace.ID && e.Existing.Name == e.Namespace.Name {
		return e.twiceError()
	}
	var b strings.Builder
	b.WriteString("keyspace: namespace conflict: ")
	if e.Existing.ID == e.Namespace.ID {
		b.WriteString("ID ")
		b.WriteString(strconv.FormatInt(int64(e.Namespace.ID), 10))
		b.WriteString(" is already ")
	} else {
		b.WriteString("name ")
		b.WriteString(strconv.Quote(e.Namespace.Name))
		b.WriteString(" is already ")
	}
	b.WriteString(describe(e.Existing))
	if e.RegisteredBy != "" {
		b.WriteString(", registered by ")
		b.WriteString(strconv.Quote(e.RegisteredBy))
	}
	b.WriteString("; cannot register ")
	b.WriteString(describe(e.Namespace))
	return b.String()
}

// twiceError describes a namespace registered twice with the same ID and
// name, listing the fields that differ.
func (e *ConflictError) twiceError() string {
	var b strings.Builder
	b.WriteString("keyspace: namespace ")
	b.WriteString(strconv.FormatInt(int64(e.Namespace.ID), 10))
	b.WriteString(" ")
	b.WriteString(strconv.Quote(e.Namespace.Name))
	b.WriteString(" registered twice with different owner or doc:")
	sep := " "
	if e.Existing.Owner != e.Namespace.Owner {
		b.WriteString(sep + "owner " + strconv.Quote(e.Existing.Owner) + " vs " + strconv.Quote(e.Namespace.Owner))
		sep = ", "
	}
	if e.Existing.Doc != e.Namespace.Doc {
		b.WriteString(sep + "doc " + strconv.Quote(e.Existing.Doc) + " vs " + strconv.Quote(e.Namespace.Doc))
		sep = ", "
	}
	if sep == " " {
		b.WriteString(" owner " + strconv.Quote(e.Namespace.Owner) + ", doc " + strconv.Quote(e.Namespace.Doc))
	}
	if e.RegisteredBy != "" {
		b.WriteString("; registered by ")
		b.WriteString(strconv.Quote(e.RegisteredBy))
	}
	return b.String()
}

// Unwrap returns [ErrConflict].
func (e *ConflictError) Unwrap() error { return ErrConflict }

// conflict returns the conflict between ns and existing, a namespace
// read from the dictionary table, or nil. They conflict when they share
// the ID or the name but not both; sharing both makes them the same
// namespace.
func conflict(ns, existing advisory.Namespace, registeredBy string) *ConflictError {
	sameID, sameName := ns.ID == existing.ID, ns.Name == existing.Name
	if sameID == sameName {
		return nil
	}
	return &ConflictError{Namespace: ns, Existing: existing, RegisteredBy: registeredBy}
}
