// Package leader elects one leader among processes that share a
// PostgreSQL database, with a session advisory lock held as an
// [advisory.Lease].
//
// [Run] campaigns for leadership and runs a function while it leads:
//
//	err := leader.Run(ctx, db, advisory.NameKey(ns, "scheduler"),
//		func(ctx context.Context, l *advisory.Lease) error {
//			return schedule(ctx, l.Token()) // ctx ends when leadership does
//		}, leader.Heartbeat(2*time.Second), leader.Fencing())
//
// # Campaigning
//
// A candidate campaigns with a blocking [advisory.Acquire]: it waits in
// the server's queue for the key, on a connection of its own. PostgreSQL
// grants the lock to the first waiter the moment the leader's session
// ends, so a successor takes over within milliseconds of the leader's
// backend being terminated. A candidate may wait for days, so it waits in
// slices of about a second, each a statement of its own, and holds no
// snapshot for longer: waiting candidates hold back neither VACUUM nor
// CREATE INDEX CONCURRENTLY. Each costs the server a backend and one short
// statement a second. Candidates are served in the order they queued,
// except that a candidate whose slice runs out queues again at the end;
// docs/waiting.md says what a wait costs and how the turn goes.
//
// # Losing the lead
//
// A leader learns that its session ended through the lease's heartbeat,
// within two heartbeat intervals ([Heartbeat]; the default is 5 seconds).
// Until then a successor may already be acting: anything the leader
// writes outside the database it elects on must carry the lease's fencing
// token ([Fencing], [advisory.Lease.Token]), and the resource must refuse
// tokens lower than the highest it has seen. That is the only guarantee
// of "never two leaders acting at once" that a lock alone can give.
//
// # What fn's return means
//
// Run calls fn with a context that ends when the lease is lost or ctx
// ends, and always waits for fn to return before it releases the lease:
//
//   - fn returns after its context ended because the lease was lost: Run
//     ignores what fn returned, waits a backoff ([Backoff]) and campaigns
//     again.
//   - fn returns nil while still leading: Run steps down (releases the
//     lease, so the next waiting candidate takes over at once) and
//     campaigns again after the shortest backoff. A leader that has
//     nothing more to do can thus hand over.
//   - fn returns an error while still leading: Run releases the lease and
//     returns fn's error, so the caller decides whether to run again.
//   - ctx ends: Run returns ctx.Err() once fn has returned and the lease
//     has been released.
//
// Errors from campaigning itself (the server is down, restarting, or
// refuses the lease) are retried with exponential backoff until ctx ends;
// only a lease that can never work, such as one through a transaction
// pooler or on a hot standby, ends Run with that error.
//
// # Who leads
//
// [Current] reads who holds the key, from pg_locks and pg_stat_activity:
// the leader's backend pid, application_name, user, client address and
// session start. Set application_name in each candidate's DSN to make the
// answer useful.
package leader
