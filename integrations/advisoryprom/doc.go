// Package advisoryprom provides a Prometheus collector of PostgreSQL
// advisory lock state, for alerts: how many locks are held and awaited in
// each namespace, how old the oldest hold is, how long the longest wait
// has lasted, how many sessions are blocked, and how many sessions sit
// idle while they hold a session lock, the symptom of a ghost lock.
//
// # Use
//
// [NewCollector] reads the database that its *sql.DB connects to, with one
// read-only statement per scrape on pg_catalog.pg_locks and
// pg_catalog.pg_stat_activity. It takes no lock and keeps no snapshot
// past that statement:
//
//	c := advisoryprom.NewCollector(db, advisoryprom.WithRegistry(keyspace.Default()))
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(c)
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// [WithRegistry] names the namespace of each pair key from a
// [github.com/pgadvisory/pgadvisory/advisory/keyspace.Registry]. Labels are
// bounded: a namespace's name, a mode and a state, never a key or a PID.
// A bigint key, and a pair whose namespace the registry does not name,
// count under namespace="".
//
// # Metrics
//
//	pgadvisory_up                          1 if the last scrape's query succeeded, else 0
//	pgadvisory_locks{namespace,mode,state} advisory locks held or awaited
//	pgadvisory_oldest_hold_seconds{namespace}
//	                                       the longest time a holder has been in its current state
//	pgadvisory_longest_wait_seconds{namespace}
//	                                       the longest wait for a lock
//	pgadvisory_blocked_sessions            sessions waiting for an advisory lock
//	pgadvisory_idle_holding_sessions       idle sessions (not in a transaction) that hold one
//	pgadvisory_longest_idle_hold_seconds   how long the longest of those has been idle
//	pgadvisory_scrape_duration_seconds     how long the scrape's query took
//
// A failed scrape is not a panic and not an HTTP error: pgadvisory_up is 0,
// the other lock metrics are missing, and [OnError] hears why.
//
// PostgreSQL does not record when a lock was granted. A hold's age is
// therefore the time its session has spent in its current state, as
// pgadvisory locks shows it: for an idle holder, or one idle in a
// transaction, the lock is at least that old. Without the pg_monitor role
// (or pg_read_all_stats) the server hides the state of other roles'
// sessions: their locks are still counted, and their waits still timed,
// but their holds have no age and they are never counted as idle holders.
//
// See docs/lockstate.md for the alerts, the scrape's cost at 10,000 locks,
// and pgadvisory serve, which serves these metrics and a page of who holds
// and who waits.
package advisoryprom
