// Package semaphore limits how many holders a named resource has at once,
// across every process that shares a PostgreSQL database: at most n, each
// holding one of n slots as an [advisory.Lease].
//
//	s := semaphore.New(db, advisory.NameKey(ns, "image-encoder"), 4)
//	l, err := s.Acquire(ctx)
//	if err != nil {
//		return err
//	}
//	defer l.Release(context.WithoutCancel(ctx))
//	return encode(l.Context()) // ends if the slot is lost
//
// # Key layout
//
// The slots are n consecutive advisory keys counted from the base key
// given to [New]: for a pair key (a, b), slot i is (a, b+i), the second
// half wrapping around within int32; for a bigint key k, slot i is k+i.
// NameKey(ns, name) is PairKey(ns, HashText(name)), so the slots of a
// named semaphore are PairKey(ns, HashText(name)+i). These n keys belong
// to the semaphore: no other lock, and no other semaphore, may use any of
// them. Keep semaphores in a namespace of their own and check names there
// for overlapping ranges, or space their base keys at least n apart.
// [Semaphore.Slot] returns slot i's key, for pg_locks and for tests.
//
// # One round trip to try
//
// [Semaphore.TryAcquire] tries every slot in one statement on a
// connection of its own,
//
//	SELECT o FROM unnest(ARRAY[k0, k1, ...]) WITH ORDINALITY s(k, o)
//	WHERE pg_try_advisory_lock(ns, k) LIMIT 1
//
// which stops at the first slot it gets, so it takes exactly one lock or
// none; the slot's lock then becomes a lease ([advisory.Watch], one more
// round trip). Each try starts at another slot, round-robin, so that
// holders spread over the slots. On pgx the slots go as one array
// parameter, so that pgx prepares the statement once per connection, not
// once per starting slot; on other drivers they are written into the
// text.
//
// # Waiting, and its fairness
//
// [Semaphore.Acquire] tries every slot; when all are taken, it waits in
// the server on one slot, chosen round-robin, with a bounded wait
// (lock_timeout, set for the statement only; see [Recheck]), and on a
// timeout tries every slot again and waits on the next one, with a bound
// twice as long, up to 32 times the first. It never polls while waiting:
// PostgreSQL grants a freed slot to its first waiter at once, in the
// server, so when every slot has waiters (the busy case), a slot that
// frees is taken within a round trip. A slot that frees while nobody
// waits on it is found by the next try: the next newcomer's, or a
// waiter's when its bound runs out.
//
// Fairness: waiters on one slot are served first come, first served, by
// the server, and a newcomer cannot take a slot that has waiters. There
// is no order across slots: a waiter may wait while a later one, on
// another slot, enters. A waiter whose bound runs out goes to the back of
// its next slot's queue; since the bound doubles, a waiter that has
// waited long waits longer before it gives up its place. Starvation is
// unlikely but not ruled out.
//
// Each waiter holds one connection of the pool while it waits, each
// holder one while it holds.
package semaphore
