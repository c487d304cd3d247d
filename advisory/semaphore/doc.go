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
// # Waiting
//
// [Semaphore.Acquire] tries every slot; when all are taken, it waits in
// the server on one slot, chosen round-robin, for at most one recheck
// ([Recheck], 1 second by default: one statement, so that the wait holds
// no snapshot for longer; see [advisory.WaitSlice]), then tries every slot
// again and waits on the next: three short statements per recheck, all
// on one connection that it keeps for the whole wait.
//
// A slot that frees reaches a waiter in one of two ways:
//
//   - When the slot has waiters, PostgreSQL grants it to the first at once,
//     in the server, so it is taken within a round trip.
//   - When it has none, the semaphore rings: every lease it hands out,
//     from Acquire or [Semaphore.TryAcquire], rings when it ends (on
//     [advisory.Lease.Release], after the unlock; after a loss, a moment
//     later, since the slot frees when the server ends the session). A
//     ring is one statement, on a connection from db, that reads pg_locks
//     and cancels (pg_cancel_backend) the wait of as many waiters on the
//     other slots as slots are free, those whose wait began first, in any
//     process on the same database. The cancelled waiter tries every slot
//     again at once, and takes the free one. Its wait, cancelled, may have
//     raced a grant, so its session is closed and it takes another
//     connection.
//
// A ring wakes only the waiters its role may signal: those of a role whose
// privileges its role has (pg_has_role, USAGE), and a superuser's only
// when it is one. Rings coalesce: while one runs, the leases that end ask
// for one more, so a semaphore rings from one goroutine at a time, back to
// back while its leases keep ending. Each gives up after a second, and
// nothing waits for it. A ring costs a round trip per release (fewer when
// they coalesce) and a read of pg_locks and pg_stat_activity;
// docs/recipes.md has the figures.
//
// A slot that frees with no ring, as when its holder's process died, a
// ring failed, or it came in the instant between a waiter's try and its
// wait, is found at the waiters' next recheck.
//
// # Fairness
//
// Waiters on one slot are served first come, first served, by the server,
// and a newcomer cannot take a slot that has waiters. A waiter leaves its
// slot's queue at each recheck and joins the next slot's at its end.
// There is no order across slots: a waiter may wait while a later one, on
// another slot, enters; a ring wakes the waiter whose current wait began
// first. Starvation is unlikely but not ruled out.
//
// Each waiter holds one connection of the pool while it waits, each
// holder one while it holds.
package semaphore
