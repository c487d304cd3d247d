// Package advisoryotel provides an advisory.Observer that records what
// pgadvisory's locks do through OpenTelemetry: a span per acquisition,
// histograms of how long acquisitions waited and locks were held, and
// counters of acquisitions by outcome and of lost leases.
//
// It is a module of its own,
// github.com/pgadvisory/pgadvisory/integrations/advisoryotel, so that
// OpenTelemetry stays out of the library's dependencies. It uses only the
// OpenTelemetry API; the program chooses the SDK and exporters.
//
// # Use
//
// [New] returns an [Observer] that records with the global tracer and
// meter providers, unless [WithTracerProvider] and [WithMeterProvider]
// name others. Install it for every lock operation, or for one scoped
// helper or lease:
//
//	obs, err := advisoryotel.New(advisoryotel.WithRegistry(keyspace.Default()))
//	if err != nil {
//		return err
//	}
//	advisory.SetObserver(obs) // every lock function, scope and lease
//
//	err = advisory.WithXactLock(ctx, db, key, run, advisory.WithObserver(obs)) // this scope only
//
// The plain lock functions (Lock, TryXactLock, ...) take no options and
// report only to the observer of advisory.SetObserver.
//
// # Spans
//
// Each acquisition is a span named [AcquireSpan], "pgadvisory.acquire", of
// kind client, a child of the span in the caller's context. The observer
// hears of an acquisition right after the lock statement answered, with
// the time from sending it to its answer: the span starts that long
// before and ends then. Its status is Error, with the error recorded,
// when the outcome is Failed or Deadlocked; Busy (a try found the key
// held) and TimedOut (a bounded wait ran out) are answers, not errors, and
// leave the status unset. A lost lease is a span of no length named
// [LossSpan], "pgadvisory.loss", with status Error, a child of the span
// that was current when the lease was acquired. A release adds an event
// named [ReleaseEvent], "pgadvisory.release", to the span in its
// context, when that span is recording.
//
// Span names are fixed. Keys are span attributes only.
//
// # Attributes
//
// From OpenTelemetry's database semantic conventions:
//
//	db.system.name           "postgresql"
//	db.operation.name        the library's operation: "lock", "try xact lock shared", "unlock", "xact end", ...
//	db.response.status_code  the SQLSTATE of the server's error, such as 55P03 or 40P01
//	error.type               that SQLSTATE, else context.Canceled or context.DeadlineExceeded, else the error's Go type
//
// And the library's own:
//
//	pgadvisory.lock.key        the key, "42" or "7:1234" (spans only)
//	pgadvisory.lock.keys       the keys of a call on several, in order (spans only)
//	pgadvisory.lock.namespace  the namespace's name, from the registry of WithRegistry
//	pgadvisory.lock.mode       "exclusive" or "shared"
//	pgadvisory.lock.level      "session" or "transaction"
//	pgadvisory.lock.outcome    "acquired", "busy", "timeout", "deadlock" or "error"
//
// # Metrics
//
//	pgadvisory.lock.wait.duration  histogram, s   namespace, mode, level, outcome
//	pgadvisory.lock.hold.duration  histogram, s   namespace, mode, level
//	pgadvisory.lock.acquisitions   counter        namespace, mode, level, outcome
//	pgadvisory.lease.lost          counter        namespace
//
// Metric attributes are few by construction: a namespace's name (bounded
// by the registry), two modes, two levels and five outcomes. They never
// carry a key, which would make a time series per key. A bigint key, and
// a pair key whose namespace the registry does not name, have no
// namespace attribute. Several keys taken together have one only when
// they share it.
//
// # Hold duration
//
// A release carries no hold time, and PostgreSQL records none. The
// observer remembers when each lock was granted (the answer that granted
// it), and a clean release (Release.Err nil) records the time since the
// newest remembered grant of the same key, mode and level, and forgets
// it: last in, first out, the order in which stacked session locks are
// released. A failed release records nothing and forgets the grant; a
// lost lease forgets its grant too, and counts in pgadvisory.lease.lost
// instead. Several keys released together record one hold each.
//
// What it cannot see:
//
//   - A plain transaction lock (XactLock, TryXactLockShared, ...) ends
//     with its transaction, which the library does not see: it records no
//     hold. Only the transaction scopes (WithXactLock, WithXactLockTx)
//     report their end.
//   - A lock released by UnlockAll, or by the end of its session, records
//     no hold.
//   - The plain lock functions report only to advisory.SetObserver's
//     observer: a lock taken through one observer and released through
//     another records no hold.
//   - Grants are paired with releases by key, mode and level, not by
//     session: when this process holds one key several times at once, as
//     shared locks often are, a release may be paired with another
//     holder's grant. The count and the sum of the holds are still right;
//     single values may be swapped.
//
// Grants whose release never comes are kept until the bound of
// [MaxTracked] forgets them: at most [DefaultMaxTracked] of each level,
// session and transaction, by default, so that neither grows without
// limit, and so that transaction locks, whose end is often unseen, never
// push out session locks held for long. Past the bound the oldest grant
// of the level is forgotten, and its release records no hold.
//
// See docs/opentelemetry.md.
package advisoryotel
