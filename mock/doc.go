// Package mock provides go-sqlmock expectations for every statement that
// package advisory sends, so that code which takes advisory locks can be
// unit-tested without a database.
//
// # Helpers
//
// Each lock function of advisory has a helper named after it with an
// Expect prefix: [ExpectXactLock] for [advisory.XactLock],
// [ExpectTryXactLock] for [advisory.TryXactLock], [ExpectUnlock] for
// [advisory.Unlock], and so on. Each lays down one expectation and returns
// sqlmock's own *sqlmock.ExpectedExec, so that the usual chaining works:
//
//	db, m := mock.New(t)
//	m.ExpectBegin()
//	mock.ExpectTryXactLock(m, key, false) // another worker holds the job
//	m.ExpectRollback()
//
//	mock.ExpectXactLock(m, key).WillReturnError(mock.ServerError("40P01")) // advisory.ErrDeadlock
//	mock.ExpectLock(m, key).WillDelayFor(time.Second)                    // a wait ctx can cut short
//
// Boolean answers are row counts, as advisory reads them: acquired true
// (or held true) answers one row, false answers none.
//
// The scoped helpers are expected with [ExpectWithXactLock],
// [ExpectWithSessionLock] and [ExpectWithSessionLockConn]. They take the
// same option values as the call they expect, and an outcome
// that says how the call ends, of a type for each kind of scope so that
// the compiler rejects one that does not fit. An [XactOutcome]: BEGIN, the
// lock, then COMMIT ([Commit]) or ROLLBACK ([Rollback], and
// [XactNotAcquired] or [XactFailed] when the lock is refused or fails). A
// [SessionOutcome]: the lock, then the statement that ends the scope
// ([Release]): for WithSessionLock, the release of key and of every other
// session lock; for WithSessionLockConn, of key alone. They return an
// [XactScope] or a [SessionScope] that holds every expectation they laid
// down, for chaining:
//
//	mock.ExpectWithXactLock(m, key, mock.XactNotAcquired, advisory.Try())
//	mock.ExpectWithXactLock(m, key, mock.XactFailed, advisory.Wait(time.Second)) // advisory.ErrLockTimeout
//	mock.ExpectWithXactLock(m, key, mock.Commit).Commit.WillReturnError(err)
//
// sqlmock matches expectations in order, so when fn sends statements of its
// own, pass [XactGranted] or [SessionGranted]: the helper stops after the lock, and the test lays
// down fn's statements and then the end:
//
//	mock.ExpectWithXactLock(m, key, mock.XactGranted, advisory.Try())
//	m.ExpectExec("UPDATE jobs").WillReturnResult(sqlmock.NewResult(0, 1))
//	m.ExpectCommit()
//
// # Leases
//
// [ExpectAcquire] expects [advisory.Acquire]: the lock statement, then the
// query that starts the lease, answered as a [LeaseOutcome] says:
// [LeaseGranted] (backend [LeasePID], and with [advisory.Fencing] the token
// [LeaseToken], or another one through [LeaseScope.WithToken]),
// [LeaseNotAcquired], [LeaseFailed], or the refusals [LeaseStandby] and
// [LeasePooler]. The returned [LeaseScope] lays down what the lease sends
// later, in order: each heartbeat the test waits for
// ([LeaseScope.ExpectHeartbeat]), then the release
// ([LeaseScope.ExpectRelease]). Give the code under test an
// [advisory.Heartbeat] interval that outlasts the test, and no heartbeat
// comes:
//
//	s := mock.ExpectAcquire(m, key, mock.LeaseGranted, advisory.Heartbeat(time.Hour))
//	s.ExpectRelease().WillReturnResult(sqlmock.NewResult(0, 0)) // advisory.ErrLockLost
//
// Under advisory.Heartbeat, [ExpectWithSessionLock] and
// [ExpectWithSessionLockConn] lay down the lease's start too, and
// [SessionScope.ExpectHeartbeat] a heartbeat.
//
// For an [advisory.Locker], [ExpectLockerConn] lays down the start of one
// of its connections, and the [LockerConn] it returns lays down what the
// Locker sends on that connection: each acquisition's try, each release,
// each heartbeat, and Close. Give the Locker advisory.LockerConfig{MaxConns: 1}:
//
//	c := mock.ExpectLockerConn(m)
//	c.ExpectAcquire(key, mock.LeaseGranted, advisory.Try())
//	c.ExpectRelease(key)
//	c.ExpectClose()
//
// Releases that queue on a connection while a statement is in flight go
// in one statement: [LockerConn.ExpectReleases] lays that statement down
// for its keys, in the order the Locker takes them.
//
// # Engines
//
// The first lock call on a *sql.DB identifies the server behind it with
// one query, and refuses a lock that cannot be real there (see
// [advisory.ErrUnsupportedEngine] and docs/engines.md). A mock is taken
// for PostgreSQL and sends no such query, so that expectations written
// without it hold. To test code on another engine, make the mock with
// [ProbeEngine] and answer the query with [ExpectEngine]; later calls on
// the same *sql.DB send nothing for it:
//
//	db, m := mock.New(t, mock.ProbeEngine())
//	mock.ExpectEngine(m, mock.CockroachDB("v24.1.0"))
//	_, err := advisory.TryLock(ctx, conn, key) // errors.Is(err, advisory.ErrUnsupportedEngine)
//
// # The statements
//
// The helpers expect the exact text advisory sends, built by the same
// internal package advisory uses, with the keys rendered the same way and
// multi-key statements sorted by [advisory.Key.Compare] without duplicates.
// The scoped helpers go one step further and ask advisory itself which
// statement its options produce, so that every option advisory has, now or
// later, is covered. Every expectation also requires that no arguments are
// sent: advisory sends a key as a parameter only on pgx's connections, and
// a mock's connection is sqlmock's, so on a mock, as on lib/pq, every key
// is in the text. A test in this package runs each advisory function against its
// helper, so a change to advisory's SQL cannot silently break the tests of
// this package's users.
//
// # Query matchers
//
// sqlmock stores one string per expectation, and its two matchers read it
// differently: the default, sqlmock.QueryMatcherRegexp, compiles it as a
// regular expression, while sqlmock.QueryMatcherEqual compares it as plain
// text. No single string serves both, since advisory's statements contain
// parentheses. The helpers therefore ask the mock's matcher: they use the
// statement quoted with [regexp.QuoteMeta] and anchored with ^ and $ when
// the matcher accepts that, and the plain statement otherwise. There is one
// way to choose the matcher, the [QueryMatcher] option of [New] (or of
// [NewDB], outside a test); a mock made by sqlmock.New gets expectations
// for sqlmock's default matcher:
//
//	db, m := mock.New(t, mock.QueryMatcher(sqlmock.QueryMatcherEqual))
//
// # Misuse
//
// A helper asked for something advisory never sends does not panic. Such
// requests are an outcome that is not one of the constants, options that
// advisory rejects, a refused lock without advisory.Try, no keys, or a
// scope's method for a statement its call does not send. The helper fails
// the test of a mock made by [New] through its testing.TB, with an error
// that names the helper and the test's line. On any mock it also lays
// down an expectation that nothing matches, an SQL comment that names the
// misuse, so that the code under test fails at its next statement and
// ExpectationsWereMet reports it, for a mock made by [NewDB] or
// sqlmock.New too. The helper lays down nothing else, and returns
// expectations laid down on no mock, so that chaining on them still
// works.
//
// # What a mock proves
//
// A mock proves that code sends the statements it should, in the order it
// should, and that it handles each answer: a lock not acquired, a timeout,
// a deadlock, a failed commit. It cannot prove mutual exclusion, or
// anything else the server does; for that, run integration tests against
// PostgreSQL (see docs/testing.md).
package mock
