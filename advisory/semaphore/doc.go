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
// none ([advisory.TryLockAny]); the slot's lock then becomes a lease
// ([advisory.Watch], one more round trip). Each try starts at another slot,
// round-robin, so that holders spread over the slots. On pgx the slots go
// as one array parameter, so that pgx prepares the statement once per
// connection, not once per starting slot; on other drivers they are written
// into the text.
//
// # Waiting
//
// [Semaphore.Acquire] waits in the server, in statements of at most one
// recheck ([Recheck], 1 second by default and at most: the bound on the
// snapshot a wait holds, see [advisory.WaitSlice]), all on one connection
// that it keeps for the whole wait. Each statement does it all: it tries
// every slot, from the next one round-robin, and when none is free waits
// for the first of them until the recheck runs out
// ([advisory.LockAnyWithin]), then the next statement tries every slot
// again. So a waiter sends one statement per recheck, and since the try and
// the wait are one statement, no slot can free unseen between them: a slot
// that frees before the statement tries it is taken by the try, and one
// that frees after finds the statement in the server, trying or waiting.
// Each statement keeps its wait below nine tenths of the session's
// statement_timeout, so that it is never cancelled for it.
//
// A slot that frees reaches a waiter in one of three ways:
//
//   - When the slot has waiters, PostgreSQL grants it to the first at once,
//     in the server, so it is taken within a round trip.
//   - When it has none, the semaphore rings: every lease it hands out, from
//     Acquire or [Semaphore.TryAcquire], rings when it ends (on
//     [advisory.Lease.Release], after the unlock; after a loss, a moment
//     later, since the slot frees when the server ends the session). A ring
//     is one statement ([advisory.CancelWaiters]), on a connection from db,
//     that reads pg_locks and cancels (pg_cancel_backend) the wait of as
//     many waiters on the other slots as slots are free, those whose wait
//     began first, in any process on the same database. The cancelled
//     waiter sends its next statement at once, on the same connection, and
//     takes the free slot.
//   - A waiter that a ring did not find, because it was between two
//     statements or had just tried the slots as the ring read pg_locks,
//     finds the slot itself: with its next statement in the first case, at
//     the end of its current one in the second (within the recheck).
//
// A cancel can land as the server grants the slot the waiter waits for,
// after the statement took it, and then the statement fails holding it.
// So each statement of a wait first releases every session lock its
// session holds (pg_advisory_unlock_all), then tries: the slot is taken
// again, once, and no lock is left over. The session is the waiter's own
// from db's pool, which holds nothing else.
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
// A slot that frees with no ring, as when its holder's process died, or
// a ring failed, is found at the waiters' next statement, within a
// recheck.
//
// Every statement of a semaphore refuses, taking nothing, on a hot standby
// ([advisory.ErrStandby]) and on a session that bears a lease's mark
// ([advisory.ErrSharedSession]), as behind a transaction pooler.
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
