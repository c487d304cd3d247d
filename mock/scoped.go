package mock

import (
	"fmt"

	"github.com/DATA-DOG/go-sqlmock"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/scope"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// An XactOutcome says how a [ExpectWithXactLock] call ends, and so which
// statements it lays down after the lock. A [SessionOutcome] does the same
// for the session helpers; the compiler keeps each to its own kind.
type XactOutcome int

const (
	// Commit: the lock is granted and fn returns nil, so the transaction
	// commits.
	Commit XactOutcome = iota + 1

	// Rollback: the lock is granted and fn returns an error or panics, so
	// the transaction rolls back.
	Rollback

	// XactNotAcquired: with [advisory.Try], the lock statement answers
	// that the key is held elsewhere; fn is not called, the transaction
	// rolls back, and the call returns an error matching
	// [advisory.ErrNotAcquired]. A lock that waits is never refused, so
	// the helper reports a misuse when opts lack Try.
	XactNotAcquired

	// XactFailed: the lock statement fails with an error, by default
	// [ServerError]("55P03"), a lock_timeout, which advisory reports as
	// [advisory.ErrLockTimeout]; chain WillReturnError on the scope's Lock
	// for another, such as ServerError("40P01") for [advisory.ErrDeadlock]
	// or context.Canceled. fn is not called, and the transaction rolls
	// back.
	XactFailed

	// XactGranted: the lock is granted and the helper lays down nothing
	// after it. Lay down fn's own statements next, then m.ExpectCommit() or
	// m.ExpectRollback().
	XactGranted
)

// String returns the outcome's name, "Commit" for example.
func (o XactOutcome) String() string {
	switch o {
	case Commit:
		return "Commit"
	case Rollback:
		return "Rollback"
	case XactNotAcquired:
		return "XactNotAcquired"
	case XactFailed:
		return "XactFailed"
	case XactGranted:
		return "XactGranted"
	}
	return fmt.Sprintf("XactOutcome(%d)", int(o))
}

// A SessionOutcome says how an [ExpectWithSessionLock] or
// [ExpectWithSessionLockConn] call ends, and so which statements it lays
// down after the lock.
type SessionOutcome int

const (
	// Release: the lock is granted, fn returns (with or without an error),
	// and the statement that ends the scope releases the lock.
	Release SessionOutcome = iota + 1

	// SessionNotAcquired: with [advisory.Try], the lock statement answers
	// that the key is held elsewhere; fn is not called, nothing more is
	// sent, and the call returns an error matching
	// [advisory.ErrNotAcquired]. The helpers report a misuse when opts
	// lack Try.
	SessionNotAcquired

	// SessionFailed: the lock statement fails, as for [XactFailed]; fn is
	// not called, and the session is closed, which sends nothing more.
	SessionFailed

	// SessionGranted: the lock is granted and the helper lays down nothing
	// after it. Lay down fn's own statements next, then
	// [SessionScope.ExpectRelease]. An fn that panics also ends with the
	// release: the scope releases the lock before the panic goes on.
	SessionGranted
)

// String returns the outcome's name, "Release" for example.
func (o SessionOutcome) String() string {
	switch o {
	case Release:
		return "Release"
	case SessionNotAcquired:
		return "SessionNotAcquired"
	case SessionFailed:
		return "SessionFailed"
	case SessionGranted:
		return "SessionGranted"
	}
	return fmt.Sprintf("SessionOutcome(%d)", int(o))
}

// XactScope holds the expectations [ExpectWithXactLock] laid down, for
// chaining: s.Lock.WillReturnError(...), s.Commit.WillReturnError(...).
// Commit is set only for the Commit outcome, and Rollback only for
// Rollback, XactNotAcquired and XactFailed.
type XactScope struct {
	Begin    *sqlmock.ExpectedBegin    // the BEGIN
	Lock     *sqlmock.ExpectedExec     // the statement that takes the lock
	Commit   *sqlmock.ExpectedCommit   // the COMMIT, or nil
	Rollback *sqlmock.ExpectedRollback // the ROLLBACK, or nil
}

// ExpectWithXactLock expects [advisory.WithXactLock] (or
// sqlxlock.WithXactLock, or a BEGIN followed by [advisory.WithXactLockTx])
// on key with opts: BEGIN, then the statement that takes the lock as opts
// say ([advisory.Try], [advisory.Wait], [advisory.Shared]), then COMMIT
// or ROLLBACK as outcome says. Pass the very options the code under test
// passes.
//
// sqlmock matches expectations in order, so statements that fn sends must
// come between the lock and the end: for an fn that sends any, use outcome
// [XactGranted], lay them down, then call m.ExpectCommit() or
// m.ExpectRollback().
//
// The lock statement is the one advisory itself builds for opts. It
// reports a misuse (see the package documentation) when advisory rejects
// opts, for example advisory.Wait(-time.Second), since the call then sends nothing
// at all; when outcome is XactNotAcquired and opts lack advisory.Try; and
// when outcome is not one of the constants.
func ExpectWithXactLock(m sqlmock.Sqlmock, key advisory.Key, outcome XactOutcome, opts ...advisory.XactOption) *XactScope {
	const helper = "mock: ExpectWithXactLock: "
	switch outcome {
	case Commit, Rollback, XactNotAcquired, XactFailed, XactGranted:
	default:
		misuse(m, helper+"%v is not an outcome: want Commit, Rollback, XactNotAcquired, XactFailed or XactGranted", outcome)
		return detachedXact()
	}
	lock, ok := lockSQL(m, helper, opts, true, key, outcome == XactNotAcquired)
	if !ok {
		return detachedXact()
	}
	s := &XactScope{Begin: m.ExpectBegin()}
	s.Lock = expectLock(m, lock, outcome == XactNotAcquired, outcome == XactFailed)
	switch outcome {
	case Commit:
		s.Commit = m.ExpectCommit()
	case Rollback, XactNotAcquired, XactFailed:
		s.Rollback = m.ExpectRollback()
	}
	return s
}

// detachedXact returns a scope of expectations laid down on no mock, for
// a helper that reported a misuse.
func detachedXact() *XactScope {
	return &XactScope{Begin: &sqlmock.ExpectedBegin{}, Lock: detachedExec(),
		Commit: &sqlmock.ExpectedCommit{}, Rollback: &sqlmock.ExpectedRollback{}}
}

// SessionScope holds the expectations [ExpectWithSessionLock] or
// [ExpectWithSessionLockConn] laid down, for chaining. Unlock holds the
// statement that ends the scope: for ExpectWithSessionLock, the release of
// key and then of every session lock of the connection; for
// ExpectWithSessionLockConn, the unlock of key alone. It is set for the
// Release outcome, or by [SessionScope.ExpectRelease]. Start is set when
// opts hold [advisory.Heartbeat] and the lock is granted: the scope then
// runs as a lease, whose start follows the lock.
type SessionScope struct {
	Lock   *sqlmock.ExpectedExec  // the statement that takes the lock
	Start  *sqlmock.ExpectedQuery // the lease's start, or nil
	Unlock *sqlmock.ExpectedExec  // the statement that ends the scope, or nil

	m     sqlmock.Sqlmock // nil when the helper reported a misuse
	end   string
	holds string // the heartbeat statement that reads pg_locks, under advisory.Heartbeat
	alive string // the heartbeat statement of the beats between
	beats int    // heartbeats laid down
}

// ExpectHeartbeat lays down one heartbeat of a scope that runs under
// [advisory.Heartbeat], as [LeaseScope.ExpectHeartbeat] does; a heartbeat
// that answers false ends fn's context, and the scope returns an error
// matching [advisory.ErrLockLost]. It reports a misuse when opts lack
// Heartbeat.
func (s *SessionScope) ExpectHeartbeat(held bool) *sqlmock.ExpectedExec {
	switch {
	case s.m == nil:
		return detachedExec()
	case s.holds == "":
		misuse(s.m, "mock: SessionScope.ExpectHeartbeat: only a scope under advisory.Heartbeat() sends heartbeats")
		return detachedExec()
	}
	return expect(s.m, nextBeat(&s.beats, s.holds, s.alive), count(held))
}

// ExpectRelease lays down the statement that ends the scope (see
// SessionScope.Unlock), as the Release outcome would have, and sets
// s.Unlock to it. Call it after fn's own statements, for a scope laid down
// with [SessionGranted]. The statement reports the lock held; chain
// WillReturnResult(sqlmock.NewResult(0, 0)) to have it report the lock lost
// ([advisory.ErrLockLost]), or sqlmock.NewResult(0, 3) to report a
// transaction left open on the connection.
func (s *SessionScope) ExpectRelease() *sqlmock.ExpectedExec {
	if s.m == nil {
		return s.Unlock
	}
	s.Unlock = expect(s.m, s.end, 1)
	return s.Unlock
}

// ExpectWithSessionLock expects [advisory.WithSessionLock] (or
// sqlxlock.WithSessionLock) on key with opts: the statement that takes the
// lock as opts say, then, for the [Release] outcome, the statement that
// releases it (and every other session lock of the connection the scope
// owns). Pass the very options the code under test passes.
//
// For an fn that sends statements of its own, or that panics, use outcome
// [SessionGranted], lay fn's statements down, then call
// [SessionScope.ExpectRelease].
//
// With [advisory.Heartbeat], the scope runs as a lease: the helper lays
// down the lease's start right after a granted lock, answered as
// [ExpectAcquire] answers it, and [SessionScope.ExpectHeartbeat] lays down
// a heartbeat.
//
// Like [ExpectWithXactLock], it takes the statements from advisory itself,
// and reports a misuse when advisory rejects opts, when outcome is
// SessionNotAcquired and opts lack advisory.Try, and when outcome is not
// one of the constants.
func ExpectWithSessionLock(m sqlmock.Sqlmock, key advisory.Key, outcome SessionOutcome, opts ...advisory.SessionOption) *SessionScope {
	return expectSession("mock: ExpectWithSessionLock: ", m, key, outcome, opts, true)
}

// ExpectWithSessionLockConn expects [advisory.WithSessionLockConn] on key
// with opts, as [ExpectWithSessionLock] does; its release unlocks key
// alone, since the caller owns the connection.
func ExpectWithSessionLockConn(m sqlmock.Sqlmock, key advisory.Key, outcome SessionOutcome, opts ...advisory.SessionOption) *SessionScope {
	return expectSession("mock: ExpectWithSessionLockConn: ", m, key, outcome, opts, false)
}

func expectSession(helper string, m sqlmock.Sqlmock, key advisory.Key, outcome SessionOutcome, opts []advisory.SessionOption, owned bool) *SessionScope {
	switch outcome {
	case Release, SessionNotAcquired, SessionFailed, SessionGranted:
	default:
		misuse(m, helper+"%v is not an outcome: want Release, SessionNotAcquired, SessionFailed or SessionGranted", outcome)
		return detachedSession()
	}
	o, ok := parse(m, helper, opts, outcome == SessionNotAcquired)
	if !ok {
		return detachedSession()
	}
	_, lock := o.LockStatement(sqltext.Inline, false, sqltext.KeyOf(key))
	var mark int64
	if o.Watched {
		mark = LeaseMark
	}
	s := &SessionScope{m: m, end: o.EndStatement(sqltext.KeyOf(key), owned, LeasePID, mark)}
	s.Lock = expectLock(m, lock.Query, outcome == SessionNotAcquired, outcome == SessionFailed)
	if o.Watched {
		s.holds = sqltext.Holds(LeasePID, o.Shared, sqltext.KeyOf(key), LeaseMark)
		s.alive = sqltext.Alive(LeasePID, LeaseMark)
		if outcome == Release || outcome == SessionGranted {
			s.Start = leaseStart(m, o, sqltext.KeyOf(key))
		}
	}
	if outcome == Release {
		s.ExpectRelease()
	}
	return s
}

// detachedSession returns a scope of expectations laid down on no mock,
// for a helper that reported a misuse; its methods lay down nothing.
func detachedSession() *SessionScope {
	return &SessionScope{Lock: detachedExec(), Start: detachedQuery(), Unlock: detachedExec()}
}

// expectLock lays down the lock statement stmt, refused or failing as
// asked, and granted otherwise.
func expectLock(m sqlmock.Sqlmock, stmt string, refused, failed bool) *sqlmock.ExpectedExec {
	switch {
	case refused:
		return expect(m, stmt, 0)
	case failed:
		return expect(m, stmt, 0).WillReturnError(ServerError("55P03"))
	}
	return expect(m, stmt, 1)
}

// lockSQL returns the statement advisory sends to take key under opts, in
// a transaction (xact) or a session, and false after a misuse; see
// [parse].
func lockSQL[O any](m sqlmock.Sqlmock, helper string, opts []O, xact bool, key advisory.Key, refused bool) (string, bool) {
	o, ok := parse(m, helper, opts, refused)
	if !ok {
		return "", false
	}
	_, stmt := o.LockStatement(sqltext.Inline, xact, sqltext.KeyOf(key))
	return stmt.Query, true
}

// parse reads opts as advisory does. It reports a misuse on m and returns
// false when advisory rejects them, since the call then sends nothing,
// and when the lock is to be refused without advisory.Try: only a try can
// be refused.
func parse[O any](m sqlmock.Sqlmock, helper string, opts []O, refused bool) (scope.Options, bool) {
	o, err := scope.ParseOf(opts)
	switch {
	case err != nil:
		misuse(m, "%s%v", helper, err)
		return o, false
	case refused && !o.Try:
		misuse(m, "%s", helper+"a refused lock needs advisory.Try(): a lock that waits is never refused, it is granted or it fails")
		return o, false
	}
	return o, true
}
