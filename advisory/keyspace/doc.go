// Package keyspace provides the dictionary of lock namespaces: who owns
// which first half of the pair keys, so that two parts of a system cannot
// take the same key for different things.
//
// # Namespaces
//
// An [advisory.Namespace] is an ID, the first half of every key of one
// part of a system, with a name, an owner and a doc. A [Registry] maps
// each ID and each name to one namespace and refuses a second claim to
// either. Packages of one program register their namespaces in the
// process-wide registry, [Default], as package-level variables, so that a
// conflict stops the program at start-up, before any lock is taken:
//
//	var billing = keyspace.Default().MustRegister(advisory.Namespace{
//		ID: 7, Name: "billing", Owner: "team-payments", Doc: "invoice runs",
//	})
//
//	err := advisory.WithXactLock(ctx, db, billing.NameKey("nightly"), run)
//
// A refused claim is a [*ConflictError], which names both claimants and
// matches [ErrConflict]. [Registry.Lookup] and [Registry.Resolve] map a
// key back to its namespace.
//
// The IDs from [ReservedMinID] to [ReservedMaxID], and the name
// "pgadvisory", belong to this library; no registry accepts them.
//
// # The dictionary table
//
// [Registry.Sync] records a registry's namespaces in a table that every
// service on the database shares, [DefaultTable] unless [Table] names
// another, and reports every namespace that another service claimed under
// another ID or name:
//
//	if err := keyspace.Default().Sync(ctx, db, keyspace.RegisteredBy("billing-api")); err != nil {
//		log.Fatal(err) // names both sides of every conflict
//	}
//
// [DefaultTable] is pgadvisory.namespaces, in the schema pgadvisory, the
// same for every service whatever its search_path. Sync creates the table
// (and the schema) if it is missing, never deletes a row, and never
// rewrites another service's row. See docs/keys.md.
package keyspace
