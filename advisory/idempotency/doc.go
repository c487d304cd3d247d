// Package idempotency provides [Run], which runs a function at most once
// per operation key, however often and however concurrently the operation
// is delivered: a retried HTTP request, a message a queue redelivers, a
// job two workers pick up.
//
// # Use
//
//	res, err := idempotency.Run(ctx, db, msg.ID, func(ctx context.Context, tx *sql.Tx) ([]byte, error) {
//		if _, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance + $1 WHERE id = $2", msg.Amount, msg.Account); err != nil {
//			return nil, err // rolled back, nothing recorded: the next delivery runs again
//		}
//		return []byte("credited"), nil // stored with the operation, for later deliveries
//	})
//	switch {
//	case errors.Is(err, idempotency.ErrInProgress):
//		// another consumer is on it: redeliver later
//	case err != nil:
//		// fn failed, or the database did: nothing was committed
//	case res.Outcome == idempotency.Done:
//		// an earlier delivery did it; res.Value is what it returned
//	}
//
// # Two guards
//
// A transaction lock on advisory.NameKey([DefaultNamespace], key) keeps out
// concurrent duplicates: the second one finds the lock taken and is
// reported [InProgress] (or, with [Wait], waits for the first to end). A
// record in the processed-operations table, inserted in the same
// transaction as fn's work, keeps out replays after the commit: they are
// reported [Done], with the []byte fn returned the first time, without
// calling fn. The work and the record commit together or not at all, so a
// crash anywhere before the commit leaves the operation undone and
// unrecorded, and the next delivery runs it. The table's primary key is
// the last guard: should a duplicate ever get past the lock, its insert
// fails, its work is rolled back, and Run reports Done.
//
// fn must therefore do its effects in the transaction it is given.
// Effects outside the database (an e-mail, a call to another service) are
// not covered: they may happen again if the commit fails after them.
//
// Two keys whose hashes collide share a lock: one may be reported
// InProgress while the other runs, about once in four billion pairs. The
// record, keyed by the full key, is never shared.
//
// The lock depends on the namespace and the key alone, not on the table:
// two services that record the same keys in tables of their own should
// give each its own [Namespace], or one may find the other's run of a key
// InProgress.
//
// # The table and its privileges
//
// The table is [DefaultTable], pgadvisory.idempotency, or the one [Table]
// names, with the columns key (text, the primary key), result (bytea) and
// created_at (timestamptz), and an index on created_at. The default is in
// the schema pgadvisory, the same for every caller whatever its
// search_path. Run creates it with [Setup] the first time it finds it
// missing, which needs the CREATE privilege on the schema, and on the
// database when the schema pgadvisory is missing too; a role without it
// runs with [NoCreate] on a table that a migration made with Setup. After
// that, Run needs SELECT and INSERT on the table (and USAGE on its
// schema), and [Purge] DELETE.
//
// # Retention
//
// Records stay until [Purge] deletes them: Purge(ctx, db, 7*24*time.Hour)
// deletes those first recorded more than a week ago. A delivery of a
// purged operation runs fn again, so keep records longer than any client
// or queue may retry.
//
// # Isolation
//
// Run is designed for READ COMMITTED, PostgreSQL's default, where each
// statement sees what committed before it began: a duplicate that waited
// for the lock ([Wait]) sees the first run's record and reports Done.
// Under REPEATABLE READ or SERIALIZABLE ([TxOptions]) its snapshot may
// predate that commit; the primary key still stops the second run, which
// Run then reports as Done, or the server reports a serialization failure.
//
// # Cost
//
// A replay costs one statement on a pooled connection. A first run costs
// a transaction: BEGIN, the lock, the second look-up, fn's statements, the
// insert and COMMIT. The transaction holds one connection of db's pool
// while fn runs.
//
// Package httplock builds its Idempotent middleware, which replays a
// stored HTTP response for a repeated Idempotency-Key, on Run.
package idempotency
