// Package pgxlock provides PostgreSQL advisory locks on pgx's own API
// (github.com/jackc/pgx/v5 and its pgxpool), with no database/sql in
// between. It is package advisory's engine behind another front: the same
// statements, waits in slices, refusals on a hot standby, error
// classification and guarantees against ghost locks, reached through
// *pgx.Conn, *pgxpool.Conn and pgx.Tx. Its functions take advisory's keys
// and options, and return advisory's errors: match them with errors.Is
// against [advisory.ErrNotAcquired], [advisory.ErrLockTimeout],
// [advisory.ErrStandby] and the rest, and reach pgx's own
// *pgconn.PgError with errors.As.
//
// # Transaction locks
//
// [WithXactLock] runs fn in a transaction of a *pgxpool.Pool that holds a
// transaction lock on a key; the lock ends with the transaction, so it
// can never outlive the call:
//
//	err := pgxlock.WithXactLock(ctx, pool, advisory.PairKey(jobsNS, id),
//		func(ctx context.Context, tx pgx.Tx) error {
//			_, err := tx.Exec(ctx, "UPDATE jobs SET state = 'running' WHERE id = $1", id)
//			return err
//		}, advisory.Try())
//	if errors.Is(err, advisory.ErrNotAcquired) {
//		return nil // another process is on it
//	}
//
// [WithXactLockTx] does the same in a transaction the caller began, and
// [TryXactLock], [XactLock], [TryXactLockShared] and [XactLockShared] take
// a lock in any pgx.Tx, released when it commits or rolls back.
//
// # Session locks
//
// [TryLock], [Lock], [TryLockShared] and [LockShared] take a session lock,
// held until [Unlock], [UnlockShared], [UnlockAll] or the end of the
// session. They take a [Conn]: a *pgx.Conn, or a *pgxpool.Conn acquired
// from a pool, never the pool itself, since each of a pool's calls may
// run on another session:
//
//	conn, err := pool.Acquire(ctx)
//	if err != nil {
//		return err
//	}
//	defer conn.Release()
//	ok, err := pgxlock.TryLock(ctx, conn, key)
//	if err != nil || !ok {
//		return err
//	}
//	defer pgxlock.Unlock(ctx, conn, key) // before Release: the lock would go back to the pool with the connection
//
// # Why Conn is a constraint
//
// *pgx.Conn and *pgxpool.Conn share Exec and QueryRow, but a session in
// doubt (a lock call whose answer was lost as ctx ended, when the lock
// may have been granted anyway) must end for good, and what ends it
// differs: a *pgx.Conn is closed; a *pgxpool.Conn has its pgx connection
// closed under it, so that every later statement on it fails and its
// Release, which the caller makes as always, destroys the connection
// instead of returning it to the pool (pgxpool destroys a released
// connection that is closed). Hijack would take it out of the pool too,
// but leave the *pgxpool.Conn without a connection, so that the caller's
// next call on it would panic. An interface of the shared methods would
// accept types whose session cannot be ended that way, such as a wrapper
// of one's own; the type set of [Conn] is exactly the two types the
// package knows how to end, and the compiler holds callers to it.
//
// # Statements and round trips
//
// Every lock call sends the key as a parameter, in text that is the same
// for every key: pgx prepares each statement once per connection, and a
// try, an uncontended wait or an unlock is then one round trip in every
// query exec mode but QueryExecModeDescribeExec, which describes every
// statement with arguments first and so costs two. The first lock call
// on a connection also identifies the server's engine, with one round
// trip more, once per connection (see docs/engines.md).
//
// # Session scopes
//
// WithSessionLock runs fn on a connection of a pool that holds a session
// lock on a key, and WithSessionLockConn on a connection the caller has;
// the lock is released when fn returns, however it ends, and a connection
// in doubt is closed rather than pooled. They have no heartbeat: a
// connection runs one statement at a time, fn's own.
//
// # Leases and the Locker
//
// Acquire takes a lease on a connection of a pool, held until its Release
// or a loss, and NewLocker holds many leases on a few of the pool's
// connections. They run on database/sql over the pool's own connections,
// with every guarantee of advisory's leases; see docs/pgx.md. The recipes
// of advisory's subpackages take a *sql.DB: give them
// stdlib.OpenDBFromPool(pool).
package pgxlock
