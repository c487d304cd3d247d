// Package pgtest hands tests and examples a disposable PostgreSQL, so that
// every integration test runs against real servers on both database/sql
// drivers the library supports: yours as well as the library's own.
//
// It imports the drivers, the testing package and a Docker client
// (github.com/ory/dockertest/v3), none of which the library's packages
// import: only test code and programs that start a throwaway server should
// import pgtest.
//
// # Where the servers come from
//
// The first of these that applies decides, for [Servers], [StartServer] and
// [Launch]:
//
//  1. PGADVISORY_TEST_DSN names existing servers, as comma-separated
//     postgres:// URLs. Nothing is started, and [StartServer] returns nil.
//  2. A reachable Docker engine runs one container per image named in
//     PGADVISORY_TEST_IMAGES (comma-separated; the default is the newest
//     local image ci/build-images.sh has built, pgadvisory/postgres:17 then
//     :15, else postgres:17, the official image). CI sets it to the images
//     that ci/build-images.sh
//     builds from Debian packages, pgadvisory/postgres:15 and
//     pgadvisory/postgres:17.
//  3. Local PostgreSQL binaries, initdb and postgres, found in
//     PGADVISORY_TEST_PGBIN if that is set, else on PATH, else in the highest
//     /usr/lib/postgresql/*/bin, run a throwaway cluster in a temporary
//     directory. As root, they run as user postgres.
//  4. Otherwise there is no database, and the tests skip; under CI=true they
//     fail instead, naming what to set.
//
// Servers run with fsync, synchronous_commit and full_page_writes off, and
// with max_connections=300. Under CI=true, tests (not Launch) fail rather
// than skip; a container that fails to start is a failure, and so is an
// unreachable Docker when PGADVISORY_TEST_IMAGES is set. With that variable
// unset, an unreachable Docker falls back to local binaries.
//
// # The fast unit loop
//
// Under go test -short, [Servers] and [StartServer] skip the test, saying
// so, before any of the above: no container, no cluster, no DSN, and no call
// to Docker. This holds under CI=true too, since -short is an explicit
// choice; without -short, CI=true still fails a test that has no database.
// A test that calls [Launch] skips under testing.Short itself; in a test
// binary under -short, Launch returns an error rather than start a server.
//
// # Use in tests
//
// A package's TestMain hands control to [Main], which stops every server the
// test binary started, even when tests fail or the binary is interrupted:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// [Each] then runs a subtest per server and driver, with a fresh *sql.DB:
//
//	func TestLock(t *testing.T) {
//		pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
//			conn, err := tg.DB.Conn(context.Background())
//			...
//		})
//	}
//
// The subtests are named "pg15/pq", "pg15/pgx", "pg17/pq" and so on, after
// the server's major version and the driver. [EachDriver] takes an explicit
// driver list, for tests that also cover [DriverPGXCancel].
//
// [StartServer] starts dedicated servers with extra settings, for tests that
// need a small lock table or an idle_session_timeout, for example. A [Proxy]
// counts the round trips a call costs.
//
// [NewDatabase] moves a [Target] onto a database of the test's own, so that
// fixed keys and table names meet no other test's. [OpenApp] names a pool's
// sessions for pg_stat_activity, and [Conn], [PID], [Exec] and the pg_locks
// helpers ([LocksOf], [AwaitFree], [AwaitGone], [RequireNoLocks]) do what
// every package's integration tests do with a session.
//
// # Poolers, restarts and frozen servers
//
// [Server.PgBouncer] starts a PgBouncer in transaction pooling mode in
// front of a server, with a pool size of the test's choosing, and returns a
// [Server] whose DSN leads through it. [Server.Open] on it adds what each
// driver needs to work through a transaction pooler at all (see
// [PoolerDSN]); what a transaction pooler does to session locks is then
// left for the test to see. The pgbouncer binary comes from Debian's package
// pgbouncer, which ci/test.sh installs; without it the test skips, or fails
// under CI=true.
//
// [Server.Restart] restarts a dedicated server (a fast shutdown, then a
// start on the same port and DSN), and [Server.Pause] freezes it until the
// function it returns is called, as docker pause does. [Server.Crash]
// kills it with no shutdown, losing the WAL it had not written, and starts
// it again through crash recovery. All three refuse a shared server, which
// other tests use.
//
// # Standbys and failover
//
// [Standbys] returns a primary with a streaming hot standby per Docker
// image, made with pg_basebackup -R and shared by a binary's tests;
// [EachStandby] runs a subtest per pair and driver. [StartStandbys] starts
// pairs of one test's own, which it may [Pair.Cut] (the standby receives
// no more WAL), [Pair.Kill] (the primary dies at once) and [Pair.Promote];
// [Pair.AwaitReplay] waits until the standby has replayed the primary's
// WAL, and [Pair.MultiHostDSN] names both servers for a driver that picks
// the writable one. Pairs need Docker.
//
// # Use in examples
//
// Runnable example programs have no testing.TB; [Launch] gives them a DSN and
// a stop function.
package pgtest
