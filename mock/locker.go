package mock

import (
	"github.com/DATA-DOG/go-sqlmock"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// A LockerConn lays down the statements of one connection of an
// [advisory.Locker]. Its statements name the connection's backend pid and
// mark, which the connection's start answers: [LeasePID] and [LeaseMark].
type LockerConn struct {
	Start *sqlmock.ExpectedQuery // the connection's start

	m sqlmock.Sqlmock
}

// ExpectLockerConn expects an [advisory.Locker] to open a connection, and
// answers its start: backend [LeasePID], not a standby, mark [LeaseMark].
// A Locker opens a connection at its first Acquire, and another at each
// Acquire while fewer than [advisory.LockerConfig.MaxConns] (and 4) are
// open and each is in use, or while fewer than MaxConns are open and each
// is busy or holds [advisory.LockerConfig.KeysPerConn] leases; give the
// Locker under test LockerConfig{MaxConns: 1} to keep to one, and a LockerConfig.Heartbeat longer than the test, or lay
// down each heartbeat it lets run with [LockerConn.ExpectHeartbeat].
func ExpectLockerConn(m sqlmock.Sqlmock) *LockerConn {
	start := m.ExpectQuery(pattern(m, sqltext.CarrierStart)).WithoutArgs().WillReturnRows(
		sqlmock.NewRows([]string{"pg_backend_pid", "pg_is_in_recovery", "set_config"}).AddRow(LeasePID, false, LeaseMark))
	return &LockerConn{Start: start, m: m}
}

// A LockerTry holds the statement that [LockerConn.ExpectAcquire] laid
// down: Exec without [advisory.Fencing], Query with it; the other is nil.
type LockerTry struct {
	Exec  *sqlmock.ExpectedExec
	Query *sqlmock.ExpectedQuery
}

// ExpectAcquire expects [advisory.Locker.Acquire] of key with opts on this
// connection: one try, answered as outcome says. [LeaseGranted] takes the
// key, with the fencing token [LeaseToken] when opts hold
// [advisory.Fencing]; [LeaseNotAcquired] finds it busy, and needs
// [advisory.Try] (without it, the Locker would go on to wait on a
// connection of its own); [LeasePooler] answers that the statement ran on
// another session, and the Locker closes the connection. For
// [LeaseFailed], chain WillReturnError on the statement: with
// ServerError("53200") Acquire reports [advisory.ErrLockTableFull] and the
// connection goes on; any other error closes the connection, and the
// Locker tries the key on a new one. It reports a misuse (see the package
// documentation) on [LeaseStandby], which a Locker learns at the
// connection's start, on options advisory rejects, and on any other
// outcome.
func (c *LockerConn) ExpectAcquire(key advisory.Key, outcome LeaseOutcome, opts ...advisory.LockerOption) *LockerTry {
	const helper = "mock: LockerConn.ExpectAcquire: "
	switch outcome {
	case LeaseGranted, LeaseNotAcquired, LeaseFailed, LeasePooler:
	default:
		misuse(c.m, helper+"%v is not an outcome of a Locker's try: want LeaseGranted, LeaseNotAcquired, LeaseFailed or LeasePooler", outcome)
		return &LockerTry{Exec: detachedExec(), Query: detachedQuery()}
	}
	o, ok := parse(c.m, helper, opts, outcome == LeaseNotAcquired)
	if !ok {
		return &LockerTry{Exec: detachedExec(), Query: detachedQuery()}
	}
	k := sqltext.KeyOf(key)
	if o.Fencing {
		q := c.m.ExpectQuery(pattern(c.m, sqltext.CarrierTryFenced(sqltext.Inline, LeasePID, LeaseMark, o.Shared, k).Query)).WithoutArgs()
		var token any // NULL: another session
		switch outcome {
		case LeaseGranted:
			token = LeaseToken
		case LeaseNotAcquired, LeaseFailed:
			token = int64(0)
		}
		q.WillReturnRows(sqlmock.NewRows([]string{"case"}).AddRow(token))
		return &LockerTry{Query: q}
	}
	rows := map[LeaseOutcome]int64{LeaseGranted: 2, LeaseNotAcquired: 1, LeaseFailed: 1, LeasePooler: 0}[outcome]
	return &LockerTry{Exec: expect(c.m, sqltext.CarrierTry(LeasePID, LeaseMark, o.Shared, k), rows)}
}

// ExpectRelease expects [advisory.Lease.Release] of a lease on key taken
// with opts on this connection, answering that the key was held.
func (c *LockerConn) ExpectRelease(key advisory.Key, opts ...advisory.LockerOption) *sqlmock.ExpectedExec {
	o, ok := parse(c.m, "mock: LockerConn.ExpectRelease: ", opts, false)
	if !ok {
		return detachedExec()
	}
	return expect(c.m, sqltext.CarrierUnlock(LeasePID, LeaseMark, o.Shared, sqltext.KeyOf(key)), 1)
}

// ExpectReleases expects the releases of leases on keys, taken with opts
// on this connection, to go together in one statement, answering that
// each key was held. A Locker sends them so when they arrive while
// another statement is in flight on the connection (a lone release is
// [LockerConn.ExpectRelease]), in the order they arrived: give it keys in
// that order.
func (c *LockerConn) ExpectReleases(keys []advisory.Key, opts ...advisory.LockerOption) *sqlmock.ExpectedQuery {
	o, ok := parse(c.m, "mock: LockerConn.ExpectReleases: ", opts, false)
	if !ok || len(keys) < 2 {
		if ok {
			misuse(c.m, "mock: LockerConn.ExpectReleases: %d keys; a batch holds two or more, and one is ExpectRelease", len(keys))
		}
		return detachedQuery()
	}
	ks := make([]sqltext.Key, len(keys))
	shared := make([]bool, len(keys))
	rows := sqlmock.NewRows([]string{"i", "case"})
	for i, k := range keys {
		ks[i], shared[i] = sqltext.KeyOf(k), o.Shared
		rows.AddRow(int64(i+1), int64(1))
	}
	stmt := sqltext.CarrierUnlockBatch(sqltext.Inline, LeasePID, LeaseMark, ks, shared)
	return c.m.ExpectQuery(pattern(c.m, stmt.Query)).WithoutArgs().WillReturnRows(rows)
}

// ExpectHeartbeat lays down one heartbeat of the connection, answering
// that its session holds held locks (one per key and mode). When held is
// below what the Locker expects, it then asks which: lay that down with
// sqlmock, or make held 0 to have every lease on the connection lost.
func (c *LockerConn) ExpectHeartbeat(held int) *sqlmock.ExpectedQuery {
	return c.m.ExpectQuery(pattern(c.m, sqltext.CarrierCount(LeasePID, LeaseMark))).WithoutArgs().
		WillReturnRows(sqlmock.NewRows([]string{"count"}).AddRow(int64(held)))
}

// ExpectClose expects [advisory.Locker.Close] to release every lock on
// this connection.
func (c *LockerConn) ExpectClose() *sqlmock.ExpectedExec {
	return c.m.ExpectExec(pattern(c.m, sqltext.CarrierRelease(LeasePID, LeaseMark))).WithoutArgs().WillReturnResult(sqlmock.NewResult(0, 1))
}
