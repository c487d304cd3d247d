// Package inspect provides a view of the advisory locks on a PostgreSQL
// server: which session holds which key, who waits for it, and who blocks
// whom. It reads pg_locks and pg_stat_activity; it takes and releases no
// lock.
//
// # Listing locks
//
// [Locks] returns every advisory lock held or awaited in the current
// database, one [Lock] per session, key and mode, in one query. Each has
// its key decoded into an [advisory.Key], its session's PID, user,
// application_name, state and query, and, for a waiter, how long it has
// waited and the PIDs that block it:
//
//	locks, err := inspect.Locks(ctx, db, inspect.WithRegistry(keyspace.Default()))
//	if err != nil {
//		return err
//	}
//	for _, l := range locks {
//		log.Print(l) // pid 4243 (billing-worker) waits 1.5s for exclusive 7:1 [billing], blocked by 4242
//	}
//
// [WithRegistry] names each key's namespace from a
// [github.com/pgadvisory/pgadvisory/advisory/keyspace.Registry], and
// [AllDatabases] reports the locks of every database on the server, not
// only the current one. Locks needs no privilege: without the pg_monitor
// role, the activity of other roles' sessions comes back empty, as [Lock]
// says, and that is not an error.
//
// # Who blocks whom
//
// [WaitGraph] renders the answer of Locks as indented text, each waiter
// under the session that blocks it:
//
//	pid 4242 (billing-api): holds exclusive 7:1 [billing]
//	  blocks pid 4243 (billing-worker): waits 1.5s for exclusive 7:1 [billing]
//
// # Keys in pg_locks
//
// pg_locks shows a bigint key k as classid = k>>32, objid = k&0xffffffff,
// objsubid = 1, and a pair (a, b) as classid = a, objid = b, objsubid = 2.
// [DecodeKey] turns those columns back into the key, for queries of one's
// own. The two forms are two key spaces: a bigint key never conflicts with
// a pair, even when their classid and objid match.
//
// See docs/keys.md for the same view in plain SQL.
package inspect
