package mock

import (
	"fmt"

	"github.com/DATA-DOG/go-sqlmock"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/hook"
)

// An Outcome says how a scoped helper's call ends, and so which statements
// [ExpectWithXactLock], [ExpectWithSessionLock] and
// [ExpectWithSessionLockConn] lay down after the lock.
type Outcome int

const (
	// Commit: WithXactLock got the lock and fn returned nil, so the
	// transaction commits. For ExpectWithXactLock only.
	Commit Outcome = iota + 1

	// Rollback: WithXactLock got the lock and fn returned an error or
	// panicked, so the transaction rolls back. For ExpectWithXactLock only.
	Rollback

	// Release: WithSessionLock got the lock, fn returned (with or without
	// an error), and the lock is released. For ExpectWithSessionLock and
	// ExpectWithSessionLockConn only.
	Release

	// NotAcquired: with [advisory.Try], the lock statement answers that
	// the key is held elsewhere; fn is not called, and the call returns an
	// error matching [advisory.ErrNotAcquired]. WithXactLock rolls back;
	// WithSessionLock sends nothing more. A lock that waits is never
	// refused, so the helpers panic when opts lack Try.
	NotAcquired

	// Failed: the lock statement fails with an error, by default
	// [ServerError]("55P03"), a lock_timeout, which advisory reports as
	// [advisory.ErrLockTimeout]; chain WillReturnError on the scope's Lock
	// for another, such as ServerError("40P01") for [advisory.ErrDeadlock]
	// or context.Canceled. fn is not called. WithXactLock rolls back;
	// WithSessionLock closes the session, which sends nothing more.
	Failed

	// Granted: the lock is granted and the helper lays down nothing after
	// it. Lay down fn's own statements next, then the end: m.ExpectCommit()
	// or m.ExpectRollback() for WithXactLock, [SessionScope.ExpectRelease]
	// for WithSessionLock. A WithSessionLock whose fn panics also ends here:
	// the session is closed and nothing more is sent.
	Granted
)

// String returns the outcome's name, "Commit" for example.
func (o Outcome) String() string {
	switch o {
	case Commit:
		return "Commit"
	case Rollback:
		return "Rollback"
	case Release:
		return "Release"
	case NotAcquired:
		return "NotAcquired"
	case Failed:
		return "Failed"
	case Granted:
		return "Granted"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// XactScope holds the expectations [ExpectWithXactLock] laid down, for
// chaining: s.Lock.WillReturnError(...), s.Commit.WillReturnError(...).
// Commit is set only for the Commit outcome, and Rollback only for
// Rollback, NotAcquired and Failed.
type XactScope struct {
	Begin    *sqlmock.ExpectedBegin    // the BEGIN
	Lock     *sqlmock.ExpectedExec     // the statement that takes the lock
	Commit   *sqlmock.ExpectedCommit   // the COMMIT, or nil
	Rollback *sqlmock.ExpectedRollback // the ROLLBACK, or nil
}

// ExpectWithXactLock expects [advisory.WithXactLock] (or
// sqlxlock.WithXactLock, or a BEGIN followed by [advisory.WithXactLockTx])
// on key with opts: BEGIN, then the statement that takes the lock as opts
// say ([advisory.Try], [advisory.Timeout], [advisory.Shared]), then COMMIT
// or ROLLBACK as outcome says. Pass the very options the code under test
// passes.
//
// sqlmock matches expectations in order, so statements that fn sends must
// come between the lock and the end: for an fn that sends any, use outcome
// [Granted], lay them down, then call m.ExpectCommit() or
// m.ExpectRollback().
//
// The lock statement is the one advisory itself builds for opts. It panics
// when advisory rejects opts, for example advisory.Timeout(0), since the
// call then sends nothing at all; when outcome is NotAcquired and opts lack
// advisory.Try; and when outcome is [Release].
func ExpectWithXactLock(m sqlmock.Sqlmock, key advisory.Key, outcome Outcome, opts ...advisory.Option) *XactScope {
	const helper = "mock: ExpectWithXactLock: "
	switch outcome {
	case Commit, Rollback, NotAcquired, Failed, Granted:
	case Release:
		panic(helper + "outcome Release is for ExpectWithSessionLock")
	default:
		panic(fmt.Sprintf(helper+"%v is not an outcome: want Commit, Rollback, NotAcquired, Failed or Granted", outcome))
	}
	sc := scopeSQL(helper, opts, true, key, outcome)
	s := &XactScope{Begin: m.ExpectBegin()}
	s.Lock = expectOutcome(m, sc.Lock, outcome)
	switch outcome {
	case Commit:
		s.Commit = m.ExpectCommit()
	case Rollback, NotAcquired, Failed:
		s.Rollback = m.ExpectRollback()
	}
	return s
}

// SessionScope holds the expectations [ExpectWithSessionLock] or
// [ExpectWithSessionLockConn] laid down, for chaining. Unlock holds the
// statement that ends the scope: for ExpectWithSessionLock, the release of
// key and then of every session lock of the connection; for
// ExpectWithSessionLockConn, the unlock of key alone. It is set for the
// Release outcome, or by [SessionScope.ExpectRelease].
type SessionScope struct {
	Lock   *sqlmock.ExpectedExec // the statement that takes the lock
	Unlock *sqlmock.ExpectedExec // the statement that ends the scope, or nil

	m      sqlmock.Sqlmock
	unlock string
}

// ExpectRelease lays down the statement that ends the scope (see
// SessionScope.Unlock), as the Release outcome would have, and sets
// s.Unlock to it. Call it after fn's own statements, for a scope laid down
// with [Granted]. The statement reports the lock held; chain
// WillReturnResult(sqlmock.NewResult(0, 0)) to have it report the lock lost
// ([advisory.ErrLockLost]).
func (s *SessionScope) ExpectRelease() *sqlmock.ExpectedExec {
	s.Unlock = expect(s.m, s.unlock, 1)
	return s.Unlock
}

// ExpectWithSessionLock expects [advisory.WithSessionLock] (or
// sqlxlock.WithSessionLock) on key with opts: the statement that takes the
// lock as opts say, then, for the [Release] outcome, the statement that
// releases it (and every other session lock of the connection the scope
// owns). Pass the very options the code under test passes.
//
// For an fn that sends statements of its own, use outcome [Granted], lay
// them down, then call [SessionScope.ExpectRelease]. For an fn that
// panics, use Granted alone: the session is closed, not unlocked.
//
// Like [ExpectWithXactLock], it takes the statements from advisory itself,
// and panics when advisory rejects opts, when outcome is NotAcquired and
// opts lack advisory.Try, and when outcome is [Commit] or [Rollback].
func ExpectWithSessionLock(m sqlmock.Sqlmock, key advisory.Key, outcome Outcome, opts ...advisory.Option) *SessionScope {
	return expectSession("mock: ExpectWithSessionLock: ", m, key, outcome, opts, true)
}

// ExpectWithSessionLockConn expects [advisory.WithSessionLockConn] on key
// with opts, as [ExpectWithSessionLock] does; its release unlocks key
// alone, since the caller owns the connection.
func ExpectWithSessionLockConn(m sqlmock.Sqlmock, key advisory.Key, outcome Outcome, opts ...advisory.Option) *SessionScope {
	return expectSession("mock: ExpectWithSessionLockConn: ", m, key, outcome, opts, false)
}

func expectSession(helper string, m sqlmock.Sqlmock, key advisory.Key, outcome Outcome, opts []advisory.Option, owned bool) *SessionScope {
	switch outcome {
	case Release, NotAcquired, Failed, Granted:
	case Commit, Rollback:
		panic(fmt.Sprintf(helper+"outcome %v is for ExpectWithXactLock", outcome))
	default:
		panic(fmt.Sprintf(helper+"%v is not an outcome: want Release, NotAcquired, Failed or Granted", outcome))
	}
	sc := scopeSQL(helper, opts, false, key, outcome)
	s := &SessionScope{m: m, unlock: sc.Unlock}
	if owned {
		s.unlock = sc.Release
	}
	s.Lock = expectOutcome(m, sc.Lock, outcome)
	if outcome == Release {
		s.ExpectRelease()
	}
	return s
}

// expectOutcome lays down the lock statement stmt answered as outcome
// says.
func expectOutcome(m sqlmock.Sqlmock, stmt string, outcome Outcome) *sqlmock.ExpectedExec {
	switch outcome {
	case NotAcquired:
		return expect(m, stmt, 0)
	case Failed:
		return expect(m, stmt, 0).WillReturnError(ServerError("55P03"))
	}
	return expect(m, stmt, 1)
}

// scopeSQL returns the statements advisory sends for key under opts, as
// advisory itself builds them. It panics when advisory rejects opts, since
// the call then sends nothing, and when outcome is NotAcquired without
// advisory.Try: only a try can be refused.
func scopeSQL(helper string, opts []advisory.Option, xact bool, key advisory.Key, outcome Outcome) hook.Scope {
	sc, err := hook.ScopeSQL(opts, xact, key)
	if err != nil {
		panic(helper + err.Error())
	}
	if outcome == NotAcquired && !sc.Try {
		panic(helper + "outcome NotAcquired needs advisory.Try(): a lock that waits is never refused, it is granted or it fails (see Failed)")
	}
	return sc
}
