package mock

import (
	"database/sql/driver"
	"fmt"

	"github.com/DATA-DOG/go-sqlmock"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/scope"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

// LeasePID is the backend pid that a lease's start answers in the mock. The
// lease's heartbeat names it, so [LeaseScope.ExpectHeartbeat] expects it.
const LeasePID int64 = 4242

// LeaseMark is the mark that a lease's start answers in the mock: the
// number the server draws and leaves on the session, which the lease's
// heartbeat checks, so that [LeaseScope.ExpectHeartbeat] expects it.
const LeaseMark int64 = 8177

// LeaseToken is the fencing token that [ExpectAcquire] answers when opts
// hold [advisory.Fencing]: the first value of a fresh sequence. Change it
// with [LeaseScope.WithToken].
const LeaseToken int64 = 1

// A LeaseOutcome says how an [ExpectAcquire] call ends, and so what the
// lease's start answers after the lock.
type LeaseOutcome int

const (
	// LeaseGranted: the lock is granted and the lease starts: the start
	// answers pid [LeasePID], not a standby, key held, and with
	// [advisory.Fencing] the token [LeaseToken]. Lay down the heartbeats
	// the test lets run ([LeaseScope.ExpectHeartbeat]), then
	// [LeaseScope.ExpectRelease].
	LeaseGranted LeaseOutcome = iota + 1

	// LeaseNotAcquired: with [advisory.Try], the lock statement answers
	// that the key is held elsewhere; nothing more is sent, and Acquire
	// returns an error matching [advisory.ErrNotAcquired]. ExpectAcquire
	// reports a misuse when opts lack Try.
	LeaseNotAcquired

	// LeaseFailed: the lock statement fails, as for [XactFailed]; nothing
	// more is sent, and the session is closed.
	LeaseFailed

	// LeaseStandby: the lock is granted, and the start answers that the
	// server is a hot standby; Acquire refuses it, and closes the session.
	LeaseStandby

	// LeasePooler: the lock is granted, and the start answers that this
	// backend does not hold the key, as when a transaction pooler sent the
	// start to another backend; Acquire refuses it, and closes the
	// session.
	LeasePooler
)

// String returns the outcome's name, "LeaseGranted" for example.
func (o LeaseOutcome) String() string {
	switch o {
	case LeaseGranted:
		return "LeaseGranted"
	case LeaseNotAcquired:
		return "LeaseNotAcquired"
	case LeaseFailed:
		return "LeaseFailed"
	case LeaseStandby:
		return "LeaseStandby"
	case LeasePooler:
		return "LeasePooler"
	}
	return fmt.Sprintf("LeaseOutcome(%d)", int(o))
}

// LeaseScope holds the expectations [ExpectAcquire] laid down, for
// chaining, and lays down the lease's later statements. Start is nil for
// LeaseNotAcquired and LeaseFailed, where nothing follows the lock.
type LeaseScope struct {
	Lock  *sqlmock.ExpectedExec  // the statement that takes the lock
	Start *sqlmock.ExpectedQuery // the lease's start, or nil

	// Token is the fencing token the start answers: [LeaseToken] with
	// [advisory.Fencing], 0 (the start answers NULL) without it.
	Token int64

	m       sqlmock.Sqlmock // nil when the helper reported a misuse
	outcome LeaseOutcome
	fencing bool
	holds   string // the heartbeat statement that reads pg_locks
	alive   string // the heartbeat statement of the beats between
	beats   int    // heartbeats laid down
	end     string // the release statement
}

// ExpectAcquire expects [advisory.Acquire] on key with opts: the statement
// that takes the lock as opts say, as for [ExpectWithSessionLock], then,
// unless the lock is refused or fails, the query that starts the lease,
// answered as outcome says. Pass the very options the code under test
// passes.
//
// The heartbeat runs every [advisory.Heartbeat] interval (5 seconds by
// default), and sqlmock matches in order, so a test either releases the
// lease before the first heartbeat is due, or lays down each heartbeat it
// waits for with [LeaseScope.ExpectHeartbeat]. Lay down the release with
// [LeaseScope.ExpectRelease].
//
// Like the other scoped helpers, it takes the statements from advisory
// itself, and reports a misuse when advisory rejects opts, when outcome is
// LeaseNotAcquired and opts lack advisory.Try, and when outcome is not one
// of the constants. It lays down nothing for the fencing sequence, which
// Acquire creates on a database that lacks it.
func ExpectAcquire(m sqlmock.Sqlmock, key advisory.Key, outcome LeaseOutcome, opts ...advisory.LeaseOption) *LeaseScope {
	const helper = "mock: ExpectAcquire: "
	switch outcome {
	case LeaseGranted, LeaseNotAcquired, LeaseFailed, LeaseStandby, LeasePooler:
	default:
		misuse(m, helper+"%v is not an outcome: want LeaseGranted, LeaseNotAcquired, LeaseFailed, LeaseStandby or LeasePooler", outcome)
		return detachedLease()
	}
	o, ok := parse(m, helper, opts, outcome == LeaseNotAcquired)
	if !ok {
		return detachedLease()
	}
	k := sqltext.KeyOf(key)
	_, lock := o.LockStatement(sqltext.Inline, false, k)
	s := &LeaseScope{
		m:       m,
		outcome: outcome,
		fencing: o.Fencing,
		holds:   sqltext.Holds(LeasePID, o.Shared, k, LeaseMark),
		alive:   sqltext.Alive(LeasePID, LeaseMark),
		end:     sqltext.LeaseEnd(LeasePID, LeaseMark, o.Shared, true, k),
	}
	s.Lock = expectLock(m, lock.Query, outcome == LeaseNotAcquired, outcome == LeaseFailed)
	if outcome == LeaseNotAcquired || outcome == LeaseFailed {
		return s
	}
	if o.Fencing {
		s.Token = LeaseToken
	}
	s.Start = m.ExpectQuery(pattern(m, sqltext.LeaseStart(sqltext.Inline, o.Shared, k, o.Fencing).Query)).WithoutArgs()
	s.answer()
	return s
}

// ExpectWatch expects [advisory.Watch] of key, a lock the connection
// already holds, with cfg: the statement that confirms the lease, as
// outcome says ([LeaseGranted], [LeaseStandby] or [LeasePooler]; Watch
// sends no lock statement, so Lock is nil). Lay down the lock the code
// takes before it, with the helper for that lock, such as [ExpectLock].
// It reports a misuse on any other outcome.
func ExpectWatch(m sqlmock.Sqlmock, key advisory.Key, outcome LeaseOutcome, cfg advisory.WatchConfig) *LeaseScope {
	const helper = "mock: ExpectWatch: "
	switch outcome {
	case LeaseGranted, LeaseStandby, LeasePooler:
	default:
		misuse(m, helper+"%v is not an outcome of Watch: want LeaseGranted, LeaseStandby or LeasePooler", outcome)
		return detachedLease()
	}
	o := scope.Options{Shared: cfg.Shared, Fencing: cfg.Fencing}
	k := sqltext.KeyOf(key)
	s := &LeaseScope{
		m:       m,
		outcome: outcome,
		fencing: o.Fencing,
		holds:   sqltext.Holds(LeasePID, o.Shared, k, LeaseMark),
		alive:   sqltext.Alive(LeasePID, LeaseMark),
		end:     sqltext.LeaseEnd(LeasePID, LeaseMark, o.Shared, true, k),
	}
	if o.Fencing {
		s.Token = LeaseToken
	}
	s.Start = m.ExpectQuery(pattern(m, sqltext.LeaseStart(sqltext.Inline, o.Shared, k, o.Fencing).Query)).WithoutArgs()
	s.answer()
	return s
}

// WithToken makes the start answer token as the fencing token, so that
// [advisory.Lease.Token] returns it, and returns s. It reports a misuse
// when opts lack [advisory.Fencing], where the start answers NULL, and
// when s laid down no start.
func (s *LeaseScope) WithToken(token int64) *LeaseScope {
	switch {
	case s.m == nil:
		return s
	case !s.fencing:
		misuse(s.m, "mock: LeaseScope.WithToken: a token needs advisory.Fencing(); without it the lease's start answers NULL")
		return s
	case s.Start == nil:
		misuse(s.m, "mock: LeaseScope.WithToken: %v sends no lease start", s.outcome)
		return s
	}
	s.Token = token
	s.answer()
	return s
}

// answer sets the row the start returns: pid, standby, held and token.
func (s *LeaseScope) answer() {
	var token driver.Value // NULL
	if s.fencing && s.outcome != LeaseStandby {
		token = s.Token // a standby cannot run nextval
	}
	row := sqlmock.NewRows([]string{"pg_backend_pid", "pg_is_in_recovery", "mine", "token", "set_config", "other"}).
		AddRow(LeasePID, s.outcome == LeaseStandby, s.outcome != LeasePooler, token, LeaseMark, nil)
	s.Start.WillReturnRows(row)
}

// ExpectHeartbeat lays down one heartbeat of the lease, answering whether
// the session still holds the lock. A heartbeat that answers false makes
// the lease lost: its context ends, [advisory.Lease.Err] matches
// [advisory.ErrLockLost], the session is closed, and Release sends
// nothing. Chain WillReturnError for a session that broke.
//
// A heartbeat must be answered within the heartbeat interval, or the
// lease gives itself up; give the call under test an interval that a
// loaded machine answers within, such as 100 milliseconds. The first
// heartbeat, and every twelfth after it, finds the lock in pg_locks; the
// ones between prove the session and its mark: each call lays down the
// statement of the next beat.
func (s *LeaseScope) ExpectHeartbeat(held bool) *sqlmock.ExpectedExec {
	if s.m == nil {
		return detachedExec()
	}
	return expect(s.m, nextBeat(&s.beats, s.holds, s.alive), count(held))
}

// nextBeat returns the statement of the heartbeat after *beats of them,
// holds or alive as the lease's heartbeat chooses, and counts it.
func nextBeat(beats *int, holds, alive string) string {
	stmt := alive
	if *beats%scope.CountEvery == 0 {
		stmt = holds
	}
	*beats++
	return stmt
}

// ExpectRelease lays down the statement [advisory.Lease.Release] sends,
// which releases the key and every other session lock of the lease's
// connection, answering that the lock was held. Chain
// WillReturnResult(sqlmock.NewResult(0, 0)) to have it report the lock
// lost ([advisory.ErrLockLost]).
func (s *LeaseScope) ExpectRelease() *sqlmock.ExpectedExec {
	if s.m == nil {
		return detachedExec()
	}
	return expect(s.m, s.end, 1)
}

// detachedLease returns a scope of expectations laid down on no mock, for
// a helper that reported a misuse; its methods lay down nothing.
func detachedLease() *LeaseScope {
	return &LeaseScope{Lock: detachedExec(), Start: detachedQuery()}
}

// leaseStart lays down the start of the lease that a session scope runs
// under [advisory.Heartbeat], granted: it never takes a fencing token.
func leaseStart(m sqlmock.Sqlmock, o scope.Options, key sqltext.Key) *sqlmock.ExpectedQuery {
	return m.ExpectQuery(pattern(m, sqltext.LeaseStart(sqltext.Inline, o.Shared, key, false).Query)).WithoutArgs().
		WillReturnRows(sqlmock.NewRows([]string{"pg_backend_pid", "pg_is_in_recovery", "mine", "token", "set_config", "other"}).
			AddRow(LeasePID, false, true, nil, LeaseMark, nil))
}
