package advisory

// A Namespace is the first half of a family of pair keys: one part of a
// system (a service, a module, a job runner) owns an ID and takes all its
// locks as PairKey(ID, n), so that two parts cannot collide by choosing the
// same "unused" number. Register namespaces in a
// [github.com/pgadvisory/pgadvisory/advisory/keyspace.Registry], which
// refuses a second owner of an ID or a name, and record them in the
// database with its Sync method, which does the same across services.
//
// Only pair keys belong to a namespace; an [Int64Key] never does.
type Namespace struct {
	ID    int32  // the first half of every key in the namespace
	Name  string // a unique, stable name, such as "billing"
	Owner string // who to ask about it: a team, a service, a module path
	Doc   string // what its keys lock
}

// Key returns PairKey(ns.ID, id): the lock numbered id in the namespace.
func (ns Namespace) Key(id int32) Key { return PairKey(ns.ID, id) }

// NameKey returns NameKey(ns.ID, name): the lock named name in the
// namespace, the same lock that hand-written SQL takes with
// pg_advisory_lock(ns.ID, hashtext(name)).
func (ns Namespace) NameKey(name string) Key { return NameKey(ns.ID, name) }
