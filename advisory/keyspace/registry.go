package keyspace

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/pgadvisory/pgadvisory/advisory"
)

// A Registry is a process's dictionary of lock namespaces: it maps each ID
// and each name to one [advisory.Namespace], and refuses a second claim to
// either, so that two modules of one program cannot share keys by
// accident. Its zero value is an empty registry ready to use, and it is
// safe for concurrent use. A Registry must not be copied after first use.
//
// Register namespaces when the program starts, typically in package-level
// variables with [Registry.MustRegister], and call [Registry.Sync] to
// record them in the database, where namespaces of other services are
// checked as well. [github.com/pgadvisory/pgadvisory/advisory/inspect.Locks]
// names the namespace of each lock it reports when given a registry with
// [github.com/pgadvisory/pgadvisory/advisory/inspect.WithRegistry].
//
// The IDs from [ReservedMinID] to [ReservedMaxID] and the name
// "pgadvisory" belong to this library and cannot be registered; every
// registry knows the library's namespace, so [Registry.Lookup] finds it.
type Registry struct {
	mu     sync.RWMutex
	byID   map[int32]advisory.Namespace
	byName map[string]int32
}

// defaultRegistry is the registry [Default] returns.
var defaultRegistry Registry

// Default returns the process-wide registry. Independent packages
// that register their namespaces in it at start-up find out there, before
// any lock is taken, that two of them chose the same ID or name:
//
//	var billing = keyspace.Default().MustRegister(advisory.Namespace{
//		ID: 7, Name: "billing", Owner: "team-payments", Doc: "invoice runs",
//	})
func Default() *Registry { return &defaultRegistry }

// Register adds ns to r. It returns an error matching [ErrConflict], a
// [*ConflictError] naming both namespaces, when another namespace already
// has ns's ID or name; one matching [ErrReserved] when ns claims an ID or
// the name reserved for this library; and an error when ns has no name.
// Registering a namespace equal to one already registered, all four
// fields alike, does nothing and returns nil; registering one with the
// same ID and name but another Owner or Doc returns a [*ConflictError]
// that says the namespace was registered twice with a different owner or
// doc.
func (r *Registry) Register(ns advisory.Namespace) error {
	if ns.Name == "" {
		return fmt.Errorf("%w: ID %d", errNoName, ns.ID)
	}
	if isReserved(ns) {
		return fmt.Errorf("%w: cannot register %s: IDs %d to %d and the name %q are reserved",
			ErrReserved, describe(ns), ReservedMinID, ReservedMaxID, libraryNamespace.Name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	if old, ok := r.byID[ns.ID]; ok {
		if old == ns {
			return nil
		}
		errs = append(errs, &ConflictError{Namespace: ns, Existing: old})
	}
	if id, ok := r.byName[ns.Name]; ok && id != ns.ID {
		errs = append(errs, &ConflictError{Namespace: ns, Existing: r.byID[id]})
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if r.byID == nil {
		r.byID = make(map[int32]advisory.Namespace)
		r.byName = make(map[string]int32)
	}
	r.byID[ns.ID] = ns
	r.byName[ns.Name] = ns.ID
	return nil
}

// MustRegister is like [Registry.Register] but panics if ns cannot be
// registered, and returns ns, so that a package can declare its namespace
// as a variable and fail at start-up on a conflict:
//
//	var reports = registry.MustRegister(advisory.Namespace{ID: 12, Name: "reports"})
func (r *Registry) MustRegister(ns advisory.Namespace) advisory.Namespace {
	if err := r.Register(ns); err != nil {
		panic(err)
	}
	return ns
}

// Lookup returns the namespace that k belongs to: the registered namespace
// whose ID is k's first half, or this library's own namespace. A bigint
// key ([advisory.Int64Key]) never belongs to a namespace, so Lookup
// reports false for every one; [Registry.Resolve] says why a key has no
// namespace.
func (r *Registry) Lookup(k advisory.Key) (advisory.Namespace, bool) {
	ns, err := r.Resolve(k)
	return ns, err == nil
}

// Resolve is like [Registry.Lookup] but explains a miss with an error
// matching [ErrNoNamespace], which says whether k is a bigint key (which
// belongs to no namespace) or a pair key whose first half no one
// registered.
func (r *Registry) Resolve(k advisory.Key) (advisory.Namespace, error) {
	id, _, ok := k.Pair()
	if !ok {
		return advisory.Namespace{}, fmt.Errorf("%w: %s is a bigint key; only pair keys belong to a namespace", ErrNoNamespace, k)
	}
	if id == libraryNamespace.ID {
		return libraryNamespace, nil
	}
	r.mu.RLock()
	ns, found := r.byID[id]
	r.mu.RUnlock()
	if !found {
		return advisory.Namespace{}, fmt.Errorf("%w: no namespace has ID %s (key %s)", ErrNoNamespace, strconv.FormatInt(int64(id), 10), k)
	}
	return ns, nil
}

// Namespaces returns the registered namespaces sorted by ID. The library's
// own namespace is not among them.
func (r *Registry) Namespaces() []advisory.Namespace {
	r.mu.RLock()
	out := make([]advisory.Namespace, 0, len(r.byID))
	for _, ns := range r.byID {
		out = append(out, ns)
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b advisory.Namespace) int { return cmp.Compare(a.ID, b.ID) })
	return out
}
