package advisory

import "time"

// AbortMargin is how long after its context ends a call may wait for a
// server that does not answer (a backend that is stopped, or a network
// that drops packets) before the library gives the session up: every
// lock call, scope and lease returns within its context's deadline plus
// AbortMargin, and a few milliseconds for the driver to see its socket
// close, on lib/pq and pgx alike. The session in doubt is closed, never
// returned to the pool; the server ends it, and releases its locks, once
// it answers again and reads the close.
//
// pgx closes its connection itself the moment a context ends during a
// statement. lib/pq sends a cancel request and waits for the statement's
// answer, however long; so on lib/pq the library closes the connection's
// socket under a statement that outlives its context by AbortMargin. The
// socket is found by reflection, since the library imports no driver: a
// lib/pq connection behind a wrapper (a tracing or metrics driver that
// wraps the driver's connections) is not found, and there a call on a
// server that stops answering returns only when it answers again. TCP
// keepalives do not help against a stopped backend, whose kernel still
// answers them. Use pgx there, or give lib/pq a dialer
// (pq.Connector.Dialer) whose connections fail a read that waits longer
// than any statement may (the library's waits run in slices of about a
// second).
//
// What bounds a call other than its context is its own: a [Locker]'s
// statements run to the end of the heartbeat interval whatever the
// caller's context (see [Locker.Acquire]), and [Lease.Release] and the
// end of a session scope release under a bound of their own, 10 s,
// whatever ctx, so that a context that ends as the lock is released does
// not make a lock that was held look lost.
const AbortMargin = 100 * time.Millisecond
