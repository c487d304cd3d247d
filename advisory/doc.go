// Package advisory provides PostgreSQL advisory locks for any database/sql
// driver: locks on a key, not on data, that the server releases when a
// transaction or a session ends.
//
// # Scoped helpers first
//
// [WithXactLock] and [WithSessionLock] take a lock, run a function, and
// release the lock however the function ends: by returning, by an error,
// or by a panic. They are the recommended way in:
//
//	err := advisory.WithXactLock(ctx, db, advisory.NameKey(7, "nightly-report"),
//		func(ctx context.Context, tx *sql.Tx) error {
//			_, err := tx.ExecContext(ctx, "INSERT INTO reports ...")
//			return err
//		}, advisory.Try())
//	if errors.Is(err, advisory.ErrNotAcquired) {
//		return nil // another process is on it
//	}
//
// [WithXactLockTx] and [WithSessionLockConn] do the same for a transaction
// or connection the caller already has, such as one from another library's
// wrapper of *sql.DB. [CommitEarly] lets fn commit before it returns, to
// answer a client only once its work is committed.
//
// # Session and transaction locks
//
// A transaction lock belongs to a *sql.Tx and ends with it, at COMMIT or
// ROLLBACK; it cannot be released sooner. [XactLock], [TryXactLock] and
// their shared forms take one. They work through any pool, PgBouncer's
// transaction mode included.
//
// A session lock belongs to the session behind a *sql.Conn, since every
// query on one Conn runs in one session, and lasts until it is unlocked or
// the session ends, across transactions. [Lock], [TryLock], [Unlock] and
// their shared forms take and release one. [TryLockAny] takes the first
// free of several keys in one statement, and [LockAnyWithin] waits up to
// a second for one when none is free; [CancelWaiters] wakes the sessions
// waiting for a range of keys, for waiters that then try every key again,
// as advisory/semaphore's do. No function takes a *sql.DB: with a pool,
// the lock and the unlock could run on two different sessions.
//
// # No ghost locks
//
// Closing a *sql.Conn returns its session to the pool with its locks, so an
// unreleased session lock stays behind for the next user of that
// connection. The scoped helpers and leases never let that happen: they
// release what they took, and whenever an operation on a session ends in
// doubt they close the session instead of trusting it. So do the plain
// functions, for what they can see: after an acquire that failed (a lock
// can be granted in the same instant that a cancel or a timeout fails the
// call), an acquire that succeeded only as the caller's context ended, a
// release that failed or found the key not held, or a multi-key statement
// that failed partway. What they cannot see is a lock the caller took and
// never released: after [Lock], the caller must [Unlock] before it closes
// conn. The session is closed through (*sql.Conn).Raw returning
// driver.ErrBadConn, the one way to make database/sql discard a
// connection; conn then reports [sql.ErrConnDone], and the server releases
// everything the session held.
//
// database/sql closes a *sql.Conn with a transaction open on it only when
// that transaction ends, and a call that closes the session waits until
// then: do not mix a transaction begun on conn with session lock calls on
// conn from the same goroutine. On pgx the library closes pgx's own
// connection at once, so that pgxpool cannot lend the session again, and
// a transaction open on conn ends with it: its statements and its Commit
// fail. On other drivers that transaction goes on, and the session ends
// when it does.
//
// # Options
//
// Each kind of call has an option type of its own, so that an option that
// cannot apply to a call does not compile there:
//
//	call                                  takes
//	WithXactLockTx                        LockOption: Try, Wait, WaitSlice, Shared, WithObserver
//	WithXactLock                          XactOption: a LockOption, or TxOptions
//	WithSessionLock, WithSessionLockConn  SessionOption: a LockOption, or Heartbeat
//	Acquire                               LeaseOption: a LockOption, Heartbeat or Fencing
//	Locker.Acquire                        LockerOption: a LockOption, or Fencing
//	NewLocker, Watch                      a struct: LockerConfig, WatchConfig
//
// A bounded wait is [Wait] everywhere, the transports' and the command's
// included, and Wait(0) does not wait: it is [Try]. Go converts one option
// to another kind, not a slice of them, so build a slice of the kind the
// call takes ([]advisory.XactOption for WithXactLock).
//
// # Waiting
//
// Every call that waits for a key first tries it: a free key costs one
// statement. A busy key is waited for in slices, statements of about a
// second each ([WaitSlice]) bounded by lock_timeout, because a statement
// that waits keeps its snapshot for as long as it waits, and holds back
// VACUUM and CREATE INDEX CONCURRENTLY for the whole database meanwhile. A
// slice for one session lock waits for the lock itself and does nothing
// after the grant, so a freed key reaches it as fast as it reaches a plain
// pg_advisory_lock; one that runs out is followed by a read of pg_locks,
// since the server may have granted the key as the slice ran out. Waiters
// keep their turn in the server's queue while their waits are shorter than
// a slice.
// docs/waiting.md says what a wait costs the server, and what each call
// does.
//
// # Where a lock is real
//
// Advisory locks are per server and per backend. So every statement that
// takes a lock first checks, in the same statement and at no extra round
// trip, that it runs on a primary and on a backend that no one else's
// lease holds, and otherwise fails before it takes anything (with an
// SQLSTATE of its own, which the library turns into the error below;
// in a transaction of the caller's, that aborts the transaction, or
// leaves it as it was when a wait's slice refused): a lock call on a hot standby
// returns [ErrStandby], and one that a transaction pooler (PgBouncer in
// transaction mode) hands to a backend where another client's lease holds
// its key returns [ErrSharedSession], where it would otherwise have taken
// the key by stacking on the lease's lock. A lease leaves a mark on its
// session for this, and removes it when it is released. Calls on the
// lease's own *sql.Conn, or under the lease's context (a session scope's
// fn, [Lease.Context]), are the lease's own and check the standby only.
// docs/engines.md says what the library does on engines that only look
// like PostgreSQL.
//
// # Leases
//
// A session lock is only as good as the session under it: a terminated
// backend, a restarted server or a broken network ends it, and its holder
// learns of it only when it next uses the connection. [Acquire] returns a
// [Lease], a session lock on a connection of its own with a heartbeat that
// proves, every interval, that this backend is still the lease's own
// session, which keeps its lock (every twelfth beat also finds the lock in
// pg_locks); its
// [Lease.Context] is cancelled the moment the lock is lost or released.
// [Heartbeat] makes [WithSessionLock] hold its lock the same way, and
// [Fencing] gives each holder a token that only grows, so that a resource
// can refuse a holder that lost its lease and does not know it yet. See
// docs/leases.md.
//
// # Keys
//
// PostgreSQL has two key spaces that never conflict: one bigint
// ([Int64Key]) and two integers ([PairKey]). [NameKey] hashes a name into
// the second half of a pair with [HashText], which is computed here exactly
// as the server's hashtext() computes it, so
//
//	advisory.NameKey(100, "sync_inventory")
//
// is the same lock as SELECT pg_advisory_lock(100, hashtext('sync_inventory')).
// Use the first half as a namespace for each part of a system, so that two
// modules cannot collide by picking the same number.
//
// # Namespaces, the dictionary and monitoring
//
// A [Namespace] names the first half of a family of pair keys, and its
// [Namespace.Key] and [Namespace.NameKey] methods build that family's keys.
// Two packages build on this one:
//
//   - [github.com/pgadvisory/pgadvisory/advisory/keyspace] records which
//     part of a system owns which namespace, refuses a second claim at
//     start-up, and shares the record with every service on the database
//     through a dictionary table.
//   - [github.com/pgadvisory/pgadvisory/advisory/inspect] lists the
//     advisory locks held and awaited on the server, with their keys
//     decoded, their holders and what blocks them, and renders who waits
//     for whom.
//
// See docs/keys.md.
//
// # Round trips
//
// Every lock function costs one round trip, on lib/pq and on pgx alike.
// On lib/pq, and any driver but pgx, the key, only integers, is written
// into the statement, which keeps the driver on its simple, unprepared
// path. On pgx a single key goes as a parameter: pgx prepares each kind of
// statement once per connection (one round trip more, once) and then runs
// it without the server parsing it again. A scope's transaction gets the
// form of its *sql.DB; a transaction the caller began gets the form of
// the driver's connection under it, which the library finds although
// database/sql gives no way to ask (and, should it not find it, the key
// in the text, which is correct on every driver). No string ever goes
// into SQL text. See docs/benchmarks.md.
//
// # Errors
//
// Failures match sentinel errors with [errors.Is]: [ErrNotAcquired],
// [ErrLockTimeout], [ErrDeadlock], [ErrNotHeld], [ErrLockLost] and
// [ErrLockTableFull]. The driver's error stays reachable with [errors.As],
// and a cancelled context with errors.Is(err, context.Canceled). The
// server's errors are recognised by SQLSTATE through the SQLState method
// that lib/pq's and pgx's errors both have; this package imports no
// driver.
package advisory
