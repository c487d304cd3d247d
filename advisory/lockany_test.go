package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/mock"
)

// anyGuardSQL opens the CASE of a try for any of several keys on a
// session that bears no lease's mark.
const anyGuardSQL = "CASE WHEN pg_catalog.pg_is_in_recovery() THEN -2 WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN -3"

// TestLockAnyBadInput: bad keys, a bad bound, a nil conn and a bad range
// are errors, sent nowhere, and never a panic.
func TestLockAnyBadInput(t *testing.T) {
	t.Parallel()
	many := make([]advisory.Key, 40)
	for i := range many {
		many[i] = advisory.Int64Key(int64(i))
	}
	many[39] = advisory.Int64Key(3)
	tests := []struct {
		name string
		call func(context.Context, *sql.Conn) error
		want error // nil: any error that is neither of the others
	}{
		{"TryNoKeys", tryAny(), nil},
		{"WaitNoKeys", waitAny(time.Second), nil},
		{"TryBothKeySpaces", tryAny(advisory.Int64Key(1), advisory.PairKey(0, 1)), advisory.ErrBadKey},
		{"WaitBothKeySpaces", waitAny(time.Second, advisory.PairKey(0, 1), advisory.Int64Key(1)), advisory.ErrBadKey},
		{"TryTwoNamespaces", tryAny(advisory.PairKey(1, 5), advisory.PairKey(2, 5)), advisory.ErrBadKey},
		{"TryDuplicate", tryAny(advisory.Int64Key(1), advisory.Int64Key(2), advisory.Int64Key(1)), advisory.ErrBadKey},
		{"WaitDuplicate", waitAny(time.Second, advisory.NameKey(3, "a"), advisory.NameKey(3, "a")), advisory.ErrBadKey},
		{"TryDuplicateOfMany", tryAny(many...), advisory.ErrBadKey},
		{"WaitZero", waitAny(0, k42), advisory.ErrBadOption},
		{"WaitNegative", waitAny(-time.Millisecond, k42), advisory.ErrBadOption},
		{"WaitOverASecond", waitAny(time.Second+time.Nanosecond, k42), advisory.ErrBadOption},
		{"TryNilConn", func(ctx context.Context, _ *sql.Conn) error {
			_, _, err := advisory.TryLockAny(ctx, nil, k42)
			return err
		}, nil},
		{"WaitNilConn", func(ctx context.Context, _ *sql.Conn) error {
			_, err := advisory.LockAnyWithin(ctx, nil, time.Second, k42)
			return err
		}, nil},
		{"CancelNilConn", func(ctx context.Context, _ *sql.Conn) error {
			_, err := advisory.CancelWaiters(ctx, nil, k42, 2)
			return err
		}, nil},
		{"CancelNoKeys", cancelWaiters(k42, 0), advisory.ErrBadKey},
		{"CancelPastLargestBigint", cancelWaiters(advisory.Int64Key(math.MaxInt64-1), 3), advisory.ErrBadKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			conn, m := mockConn(t)
			err := tt.call(context.Background(), conn)
			switch {
			case err == nil || !strings.HasPrefix(err.Error(), "advisory: "):
				t.Fatalf("err = %v; want an error starting advisory: ", err)
			case tt.want != nil && !errors.Is(err, tt.want):
				t.Errorf("err = %v; want an error matching %v", err, tt.want)
			case tt.want == nil && (errors.Is(err, advisory.ErrBadKey) || errors.Is(err, advisory.ErrBadOption)):
				t.Errorf("err = %v; want neither ErrBadKey nor ErrBadOption", err)
			}
			if err := m.ExpectationsWereMet(); err != nil {
				t.Error(err)
			}
		})
	}
	// The range of CancelWaiters may end at the largest bigint.
	t.Run("CancelUpToLargestBigint", func(t *testing.T) {
		t.Parallel()
		conn, m := mockConn(t)
		mock.ExpectCancelWaiters(m, advisory.Int64Key(math.MaxInt64-2), 3, 0)
		if _, err := advisory.CancelWaiters(context.Background(), conn, advisory.Int64Key(math.MaxInt64-2), 3); err != nil {
			t.Error(err)
		}
	})
}

func tryAny(keys ...advisory.Key) func(context.Context, *sql.Conn) error {
	return func(ctx context.Context, c *sql.Conn) error {
		_, _, err := advisory.TryLockAny(ctx, c, keys...)
		return err
	}
}

func waitAny(d time.Duration, keys ...advisory.Key) func(context.Context, *sql.Conn) error {
	return func(ctx context.Context, c *sql.Conn) error {
		_, err := advisory.LockAnyWithin(ctx, c, d, keys...)
		return err
	}
}

func cancelWaiters(first advisory.Key, n int) func(context.Context, *sql.Conn) error {
	return func(ctx context.Context, c *sql.Conn) error {
		_, err := advisory.CancelWaiters(ctx, c, first, n)
		return err
	}
}

// TestTryLockAnySQL: the statement, each of its answers, and which
// errors keep the session.
func TestTryLockAnySQL(t *testing.T) {
	t.Parallel()
	keys := []advisory.Key{advisory.PairKey(7, 2), advisory.PairKey(7, -3), advisory.PairKey(7, 0)}
	const query = "SELECT " + anyGuardSQL + " ELSE COALESCE((SELECT s.o FROM pg_catalog.unnest(ARRAY[2,-3,0]::pg_catalog.int4[]) WITH ORDINALITY AS s(k, o) WHERE pg_catalog.pg_try_advisory_lock(7, s.k) LIMIT 1), 0) END"
	tests := []struct {
		name    string
		answer  int64
		err     error
		took    int   // the place of the key taken, or -1
		wantErr error // nil: none, unless err is set
		kept    bool  // the session stays open
	}{
		{name: "First", answer: 1, took: 0, kept: true},
		{name: "Last", answer: 3, took: 2, kept: true},
		{name: "AllTaken", answer: 0, took: -1, kept: true},
		{name: "Standby", answer: -2, took: -1, wantErr: advisory.ErrStandby, kept: true},
		{name: "Marked", answer: -3, took: -1, wantErr: advisory.ErrSharedSession, kept: true},
		{name: "PlaceOutOfRange", answer: 4, took: -1},
		{name: "LockTableFull", err: &sqlState{"53200", "out of shared memory"}, took: -1, wantErr: advisory.ErrLockTableFull},
		{name: "Cancelled", err: &sqlState{"57014", "canceling statement due to user request"}, took: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			conn, m := mockConn(t)
			q := m.ExpectQuery(query).WithoutArgs()
			if tt.err != nil {
				q.WillReturnError(tt.err)
			} else {
				q.WillReturnRows(sqlmock.NewRows([]string{"o"}).AddRow(tt.answer))
			}
			k, ok, err := advisory.TryLockAny(context.Background(), conn, keys...)
			wantOK := tt.took >= 0
			switch {
			case ok != wantOK || ok && k != keys[tt.took]:
				t.Errorf("TryLockAny = %v, %t; want place %d", k, ok, tt.took)
			case tt.err == nil && tt.answer >= 0 && tt.answer <= 3 && err != nil:
				t.Errorf("err = %v; want nil", err)
			case (tt.err != nil || tt.answer < 0 || tt.answer > 3) && (err == nil || !strings.HasPrefix(err.Error(), "advisory: try lock any [7:2 7:-3 7:0]")):
				t.Errorf("err = %v; want an error of try lock any [7:2 7:-3 7:0]", err)
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Errorf("err = %v; want an error matching %v", err, tt.wantErr)
			case tt.err != nil && !errors.Is(err, tt.err):
				t.Errorf("err = %v; want the driver's error reachable", err)
			}
			requireKept(t, conn, m, tt.kept)
		})
	}
}

// TestLockAnyWithinSQL: the statement, its answer, and which errors
// keep the session: a wait that ran out, and one the server cancelled.
func TestLockAnyWithinSQL(t *testing.T) {
	t.Parallel()
	keys := []advisory.Key{advisory.Int64Key(5), advisory.Int64Key(-6)}
	tests := []struct {
		name    string
		err     error
		wantErr error
		kept    bool
	}{
		{name: "Took"},
		{name: "RanOut", err: &sqlState{"55P03", "canceling statement due to lock timeout"}, wantErr: advisory.ErrLockTimeout, kept: true},
		{name: "Woken", err: &sqlState{"57014", "canceling statement due to user request"}, wantErr: advisory.ErrLockTimeout, kept: true},
		{name: "Deadlock", err: &sqlState{"40P01", "deadlock detected"}, wantErr: advisory.ErrDeadlock},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			conn, m := mockConn(t)
			q := mock.ExpectLockAnyWithin(m, 250*time.Millisecond-time.Microsecond, 1, keys...)
			if !strings.Contains(q.String(), "pg_catalog.pg_advisory_unlock_all()") || !strings.Contains(q.String(), "LEAST(250,") {
				t.Errorf("the statement does not release the session's locks first, or waits other than 250 ms: %s", q)
			}
			if tt.err != nil {
				q.WillReturnError(tt.err)
			}
			k, err := advisory.LockAnyWithin(context.Background(), conn, 250*time.Millisecond-time.Microsecond, keys...)
			switch {
			case tt.err == nil && (err != nil || k != keys[1]):
				t.Errorf("LockAnyWithin = %v, %v; want %v", k, err, keys[1])
			case tt.err != nil && (err == nil || !errors.Is(err, tt.wantErr) || !errors.Is(err, tt.err)):
				t.Errorf("LockAnyWithin = %v, %v; want an error matching %v and the driver's", k, err, tt.wantErr)
			case tt.err != nil && !strings.HasPrefix(err.Error(), "advisory: lock any [5 -6]"):
				t.Errorf("err = %v; want an error of lock any [5 -6]", err)
			}
			requireKept(t, conn, m, tt.err == nil || tt.kept)
		})
	}
	// A wait that ctx ends closes the session.
	t.Run("ContextEnded", func(t *testing.T) {
		t.Parallel()
		conn, m := mockConn(t)
		ctx, cancel := context.WithCancel(context.Background())
		mock.ExpectLockAnyWithin(m, time.Second, 0, keys...).WillReturnError(&sqlState{"57014", "canceling statement due to user request"}).
			WillDelayFor(10 * time.Millisecond)
		time.AfterFunc(time.Millisecond, cancel)
		if _, err := advisory.LockAnyWithin(ctx, conn, time.Second, keys...); !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v; want context.Canceled", err)
		}
		requireKept(t, conn, m, false)
	})
}

// TestCancelWaitersSQL: the statement for each key space, and a failure,
// which closes the session.
func TestCancelWaitersSQL(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		first advisory.Key
		cond  string
	}{
		{"Pair", advisory.PairKey(-7, -2), "l.objsubid = 2 AND l.classid = 4294967289::pg_catalog.oid AND ((l.objid::pg_catalog.int8 - 4294967294) & 4294967295) < 4"},
		{"Bigint", advisory.Int64Key(-2), "l.objsubid = 1 AND ((l.classid::pg_catalog.int8 << 32) | l.objid::pg_catalog.int8) BETWEEN -2 AND 1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			conn, m := mockConn(t)
			q := mock.ExpectCancelWaiters(m, tt.first, 4, 3)
			if !strings.Contains(q.String(), tt.cond) || !strings.Contains(q.String(), "pg_catalog.pg_cancel_backend(p.pid)") {
				t.Errorf("%s\nlacks %s", q, tt.cond)
			}
			if n, err := advisory.CancelWaiters(context.Background(), conn, tt.first, 4); n != 3 || err != nil {
				t.Errorf("CancelWaiters = %d, %v; want 3, nil", n, err)
			}
			requireKept(t, conn, m, true)
		})
	}
	t.Run("Failed", func(t *testing.T) {
		t.Parallel()
		conn, m := mockConn(t)
		boom := &sqlState{"XX000", "boom"}
		mock.ExpectCancelWaiters(m, k42, 2, 0).WillReturnError(boom)
		if n, err := advisory.CancelWaiters(context.Background(), conn, k42, 2); n != 0 || !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "advisory: cancel waiters 42") {
			t.Errorf("CancelWaiters = %d, %v; want 0 and an error of cancel waiters 42 wrapping the driver's", n, err)
		}
		requireKept(t, conn, m, false)
	})
}

// requireKept fails t unless conn is open (kept) or closed for good, as
// a next statement shows.
func requireKept(t *testing.T, conn *sql.Conn, m sqlmock.Sqlmock, kept bool) {
	t.Helper()
	if kept {
		m.ExpectExec("SELECT 1").WillReturnResult(rows(1))
	}
	_, err := conn.ExecContext(context.Background(), "SELECT 1")
	switch {
	case kept && err != nil:
		t.Errorf("the session was closed: %v", err)
	case !kept && !errors.Is(err, sql.ErrConnDone):
		t.Errorf("the session was kept: Exec err = %v, want sql.ErrConnDone", err)
	}
	if err := m.ExpectationsWereMet(); err != nil {
		t.Error(err)
	}
}
