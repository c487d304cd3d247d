package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
	"github.com/pgadvisory/pgadvisory/mock"
)

// Unit tests of a wait for a busy key, which runs in slices: statements
// that each wait at most about a second under lock_timeout, so that none
// holds a snapshot for longer. A slice is 1100 ms by default; one that
// runs out fails with SQLSTATE 55P03, and the wait goes on. A wait for one
// key, in a session as in a transaction, reads the session's settings
// right after the try that found it busy; a wait for several runs its
// first slice blind and reads them after the first slice that ran out.

func TestLockWaitsInSlices(t *testing.T) {
	t.Parallel()
	k1, k2 := advisory.Int64Key(1), advisory.Int64Key(2)
	tests := []struct {
		name   string
		call   func(context.Context, *sql.Conn) error
		try    string // the try sent first, which finds the key busy; "" for none
		shared bool
		keys   []sqltext.Key
	}{
		{name: "Lock", call: func(ctx context.Context, c *sql.Conn) error { return advisory.Lock(ctx, c, k42) },
			try: sqltext.TryLock(sqltext.Guarded, false, false, sqltext.KeyOf(k42)), keys: []sqltext.Key{sqltext.KeyOf(k42)}},
		{name: "LockShared", call: func(ctx context.Context, c *sql.Conn) error { return advisory.LockShared(ctx, c, kPair) },
			try: sqltext.TryLock(sqltext.Guarded, false, true, sqltext.KeyOf(kPair)), shared: true, keys: []sqltext.Key{sqltext.KeyOf(kPair)}},
		// Several keys are not tried: the wait starts with a slice.
		{name: "LockKeys", call: func(ctx context.Context, c *sql.Conn) error { return advisory.LockKeys(ctx, c, k2, k1) },
			keys: []sqltext.Key{sqltext.KeyOf(k1), sqltext.KeyOf(k2)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			conn, m := mockConn(t)
			if tt.try != "" {
				m.ExpectExec(tt.try).WithoutArgs().WillReturnResult(rows(0))
				m.ExpectQuery(sqltext.WaitSettings).WillReturnRows(defaultSettings())
			}
			m.ExpectExec(sqltext.SessionSlice(sqltext.Guarded, tt.shared, 1100, tt.keys...)).WithoutArgs().WillReturnError(errRanOut)
			if tt.try == "" {
				m.ExpectQuery(sqltext.WaitSettings).WillReturnRows(defaultSettings())
			}
			m.ExpectExec(sqltext.SessionSlice(sqltext.Guarded, tt.shared, 1100, tt.keys...)).WithoutArgs().WillReturnResult(rows(1))
			if err := tt.call(context.Background(), conn); err != nil {
				t.Fatalf("got %v; want nil once the second slice takes the lock", err)
			}
			// A slice that runs out holds nothing: the session is still
			// ours.
			if err := conn.PingContext(context.Background()); err != nil {
				t.Fatalf("conn unusable after a wait in slices: %v", err)
			}
		})
	}
}

// TestWithXactLockWaitsInNewTransactions: a scope that began its own
// transaction waits for a busy key in transactions of its own, one a
// slice: each slice ends the transaction before it and begins the next in
// the same statement, on the same *sql.Tx, which fn gets.
func TestWithXactLockWaitsInNewTransactions(t *testing.T) {
	t.Parallel()
	key := sqltext.KeyOf(k42)
	tests := []struct {
		name   string
		ranOut int // slices that run out before one takes the key
	}{
		{"FirstSlice", 0},
		{"AfterOneRanOut", 1},
		{"AfterTwoRanOut", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, m := mock.New(t, exactSQL)
			m.ExpectBegin()
			m.ExpectExec(sqltext.TryLock(sqltext.Guarded, true, false, key)).WithoutArgs().WillReturnResult(rows(0))
			m.ExpectQuery(sqltext.WaitSettings).WillReturnRows(defaultSettings())
			slice := "ROLLBACK; BEGIN; " + sqltext.GuardedXactSlice(sqltext.Guarded, false, 1100, key)
			for range tt.ranOut {
				m.ExpectExec(slice).WithoutArgs().WillReturnError(errRanOut)
			}
			m.ExpectExec(slice).WithoutArgs().WillReturnResult(rows(1))
			m.ExpectExec("UPDATE jobs SET done = true").WillReturnResult(rows(1))
			m.ExpectCommit()
			err := advisory.WithXactLock(context.Background(), db, k42, func(ctx context.Context, tx *sql.Tx) error {
				if scoped, ok := advisory.TxFromContext(ctx); !ok || scoped != tx {
					t.Errorf("TxFromContext = %p, %v; want fn's tx %p", scoped, ok, tx)
				}
				// A transaction that was rolled back would fail this with
				// sql.ErrTxDone.
				_, err := tx.ExecContext(ctx, "UPDATE jobs SET done = true")
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestWaitTimeoutRunsOut: with Timeout, the first slice is the whole
// wait, and its running out is ErrLockTimeout; it holds nothing, so a
// session scope's connection goes back to the pool.
func TestWaitTimeoutRunsOut(t *testing.T) {
	t.Parallel()
	key := sqltext.KeyOf(k42)
	timeout := advisory.Wait(150 * time.Millisecond)
	tests := []struct {
		name   string
		expect func(m sqlmock.Sqlmock)
		call   func(ctx context.Context, db *sql.DB, called *bool) error
	}{
		{name: "WithSessionLock", expect: func(m sqlmock.Sqlmock) {
			m.ExpectExec(sqltext.TryLock(sqltext.Guarded, false, false, key)).WithoutArgs().WillReturnResult(rows(0))
			m.ExpectQuery(sqltext.WaitSettings).WillReturnRows(defaultSettings())
			m.ExpectExec(sqltext.SessionSlice(sqltext.Guarded, false, 150, key)).WithoutArgs().WillReturnError(errRanOut)
		}, call: func(ctx context.Context, db *sql.DB, called *bool) error {
			return advisory.WithSessionLock(ctx, db, k42, func(context.Context, *sql.Conn) error { *called = true; return nil }, timeout)
		}},
		{name: "WithXactLock", expect: func(m sqlmock.Sqlmock) {
			m.ExpectBegin()
			m.ExpectExec(sqltext.TryLock(sqltext.Guarded, true, false, key)).WithoutArgs().WillReturnResult(rows(0))
			m.ExpectQuery(sqltext.WaitSettings).WillReturnRows(defaultSettings())
			m.ExpectExec("ROLLBACK; BEGIN; " + sqltext.GuardedXactSlice(sqltext.Guarded, false, 150, key)).WithoutArgs().WillReturnError(errRanOut)
			m.ExpectRollback()
		}, call: func(ctx context.Context, db *sql.DB, called *bool) error {
			return advisory.WithXactLock(ctx, db, k42, func(context.Context, *sql.Tx) error { *called = true; return nil }, timeout)
		}},
		{name: "WithXactLockTx", expect: func(m sqlmock.Sqlmock) {
			m.ExpectBegin()
			m.ExpectExec(sqltext.TryLock(sqltext.Guarded, true, false, key)).WithoutArgs().WillReturnResult(rows(0))
			m.ExpectQuery(sqltext.WaitSettings).WillReturnRows(defaultSettings())
			m.ExpectExec(sqltext.InSavepoint(false, sqltext.GuardedXactSlice(sqltext.Guarded, false, 150, key))).WithoutArgs().WillReturnError(errRanOut)
			// The wait leaves the caller's transaction as it was.
			m.ExpectExec(sqltext.LeaveWaitSavepoint).WithoutArgs().WillReturnResult(rows(0))
			m.ExpectRollback()
		}, call: func(ctx context.Context, db *sql.DB, called *bool) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			return advisory.WithXactLockTx(ctx, tx, k42, func(context.Context, *sql.Tx) error { *called = true; return nil }, timeout)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, m := mock.New(t, sliceSQL)
			tt.expect(m)
			called := false
			err := tt.call(context.Background(), db, &called)
			if called {
				t.Error("fn called without the lock")
			}
			if !errors.Is(err, advisory.ErrLockTimeout) || !errors.Is(err, errRanOut) {
				t.Fatalf("got %v; want ErrLockTimeout, with the driver's error", err)
			}
			if n := db.Stats().OpenConnections; n != 1 {
				t.Fatalf("%d connections open; the session should be back in the pool", n)
			}
		})
	}
}

// TestWaitRunsOutKeepsTheSession: a wait without Timeout ends when the
// session's lock_timeout or statement_timeout, counted from its start,
// runs out. Its slices hold nothing when they run out, so the session is
// not discarded. The mock's delays stand for the server's waits.
func TestWaitRunsOutKeepsTheSession(t *testing.T) {
	t.Parallel()
	key := sqltext.KeyOf(k42)
	tests := []struct {
		name      string
		settings  *sqlmock.Rows
		slices    []int         // the slices sent after the settings, each of which runs out
		firstWait time.Duration // how long the server lets the first of them wait
	}{
		// The settings come before the first slice, which waits for what
		// is left of the session's lock_timeout, shorter than a slice:
		// the last.
		{name: "LockTimeoutBoundsTheFirstSlice", settings: waitSettingsRows("100ms", "0", "1s"), slices: []int{100}},
		// The first slice waits nine tenths of the statement_timeout, and
		// the slice after it what is left: the last, whose running out
		// ends the wait with the driver's error.
		{name: "StatementTimeoutBoundsTheLastSlice", settings: waitSettingsRows("0", "500ms", "1s"), slices: []int{450, 50},
			firstWait: 450 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			conn, m := mockConn(t, sliceSQL)
			m.ExpectExec(sqltext.TryLock(sqltext.Guarded, false, false, key)).WithoutArgs().WillReturnResult(rows(0))
			m.ExpectQuery(sqltext.WaitSettings).WillReturnRows(tt.settings)
			for i, ms := range tt.slices {
				e := m.ExpectExec(sqltext.SessionSlice(sqltext.Guarded, false, int64(ms), key)).WithoutArgs()
				if i == 0 {
					e.WillDelayFor(tt.firstWait)
				}
				e.WillReturnError(errRanOut)
			}
			err := advisory.Lock(context.Background(), conn, k42)
			if !errors.Is(err, advisory.ErrLockTimeout) || !errors.Is(err, errRanOut) {
				t.Fatalf("got %v; want ErrLockTimeout, with the driver's error", err)
			}
			const want = "advisory: lock 42: lock wait timed out: driver: canceling statement due to lock timeout (SQLSTATE 55P03)"
			if err.Error() != want {
				t.Errorf("message\n got %q\nwant %q", err, want)
			}
			if err := conn.PingContext(context.Background()); err != nil {
				t.Fatalf("conn discarded after a wait that ran out: %v", err)
			}
		})
	}
}

// TestWaitCancelledDuringSliceDiscards: a statement of a wait that ctx
// ends may have been granted as it ended, so the session is discarded: the
// try, which is the whole of a wait for a free key, or a slice after the
// settings.
func TestWaitCancelledDuringSliceDiscards(t *testing.T) {
	t.Parallel()
	key := sqltext.KeyOf(k42)
	try := sqltext.TryLock(sqltext.Guarded, false, false, key)
	tests := []struct {
		name  string
		slice string // the statement that ctx ends
	}{
		{"Try", try},
		{"AfterTheSettings", sqltext.SessionSlice(sqltext.Guarded, false, 1100, key)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// ctx ends as the slice reaches the server: the matcher
			// cancels it, and sqlmock answers a statement whose delay ctx
			// cuts short with sqlmock.ErrCancelled.
			cancelAtSlice := sqlmock.QueryMatcherFunc(func(expected, actual string) error {
				if actual == tt.slice {
					cancel()
				}
				return sqlmock.QueryMatcherEqual.Match(expected, actual)
			})
			conn, m := mockConn(t, mock.QueryMatcher(cancelAtSlice))
			if tt.slice != try {
				m.ExpectExec(try).WithoutArgs().WillReturnResult(rows(0))
				m.ExpectQuery(sqltext.WaitSettings).WillReturnRows(defaultSettings())
			}
			m.ExpectExec(tt.slice).WithoutArgs().WillDelayFor(time.Minute).WillReturnResult(rows(1))
			m.ExpectClose()
			err := advisory.Lock(ctx, conn, k42)
			if !errors.Is(err, context.Canceled) || !errors.Is(err, sqlmock.ErrCancelled) {
				t.Fatalf("got %v; want context.Canceled, with the driver's error", err)
			}
			if err := conn.PingContext(context.Background()); !errors.Is(err, sql.ErrConnDone) {
				t.Fatalf("after a slice that ctx ended the conn is still usable (ping: %v)", err)
			}
		})
	}
}

// TestTryRefused: a try that the server refuses (the check raised the
// refusal's SQLSTATE before the lock function ran) returns ErrStandby or
// ErrSharedSession, for a try and for the try that starts a wait, in a
// session as in a transaction, and nothing more is sent.
func TestTryRefused(t *testing.T) {
	t.Parallel()
	key := sqltext.KeyOf(k42)
	sessionCalls := []struct {
		name string
		call func(context.Context, *sql.Conn) error
	}{
		{"Lock", func(ctx context.Context, c *sql.Conn) error { return advisory.Lock(ctx, c, k42) }},
		{"TryLock", func(ctx context.Context, c *sql.Conn) error { _, err := advisory.TryLock(ctx, c, k42); return err }},
	}
	xactCalls := []struct {
		name string
		call func(context.Context, *sql.Tx) error
	}{
		{"XactLock", func(ctx context.Context, tx *sql.Tx) error { return advisory.XactLock(ctx, tx, k42) }},
		{"TryXactLock", func(ctx context.Context, tx *sql.Tx) error { _, err := advisory.TryXactLock(ctx, tx, k42); return err }},
	}
	for _, r := range refusals {
		for _, c := range sessionCalls {
			t.Run(c.name+r.name, func(t *testing.T) {
				t.Parallel()
				conn, m := mockConn(t)
				m.ExpectExec(sqltext.TryLock(sqltext.Guarded, false, false, key)).WithoutArgs().WillReturnError(r.err)
				checkRefused(t, c.call(context.Background(), conn), r.wantErr, r.err)
				checkKept(t, conn)
			})
		}
		for _, c := range xactCalls {
			t.Run(c.name+r.name, func(t *testing.T) {
				t.Parallel()
				tx, m := mockTx(t)
				m.ExpectExec(sqltext.TryLock(sqltext.Guarded, true, false, key)).WithoutArgs().WillReturnError(r.err)
				m.ExpectRollback()
				checkRefused(t, c.call(context.Background(), tx), r.wantErr, r.err)
			})
		}
	}
}

// TestScopeTryRefused: a scope whose try the server refuses returns the
// refusal and never calls fn; a transaction scope rolls back.
func TestScopeTryRefused(t *testing.T) {
	t.Parallel()
	key := sqltext.KeyOf(k42)
	for _, r := range refusals {
		t.Run("WithSessionLock"+r.name, func(t *testing.T) {
			t.Parallel()
			db, m := mock.New(t, exactSQL)
			m.ExpectExec(sqltext.TryLock(sqltext.Guarded, false, false, key)).WithoutArgs().WillReturnError(r.err)
			err := advisory.WithSessionLock(context.Background(), db, k42, func(context.Context, *sql.Conn) error {
				t.Error("fn called under a refused lock")
				return nil
			})
			checkRefused(t, err, r.wantErr, r.err)
		})
		t.Run("WithXactLock"+r.name, func(t *testing.T) {
			t.Parallel()
			db, m := mock.New(t, exactSQL)
			m.ExpectBegin()
			m.ExpectExec(sqltext.TryLock(sqltext.Guarded, true, false, key)).WithoutArgs().WillReturnError(r.err)
			m.ExpectRollback()
			err := advisory.WithXactLock(context.Background(), db, k42, func(context.Context, *sql.Tx) error {
				t.Error("fn called under a refused lock")
				return nil
			})
			checkRefused(t, err, r.wantErr, r.err)
		})
	}
}

// TestSessionWaitRefused: a slice that the server refuses (its check, the
// select-list entry after its bound, raised the refusal's SQLSTATE before
// the waits ran) ends the wait with ErrStandby or ErrSharedSession, and
// nothing more is sent: a slice after the try that found the key busy and
// the settings, or the first slice of a wait for several keys.
func TestSessionWaitRefused(t *testing.T) {
	t.Parallel()
	key := sqltext.KeyOf(k42)
	keys := []sqltext.Key{sqltext.KeyOf(advisory.Int64Key(1)), sqltext.KeyOf(advisory.Int64Key(2))}
	for _, r := range refusals {
		t.Run("Lock"+r.name, func(t *testing.T) {
			t.Parallel()
			conn, m := mockConn(t)
			m.ExpectExec(sqltext.TryLock(sqltext.Guarded, false, false, key)).WithoutArgs().WillReturnResult(rows(0))
			m.ExpectQuery(sqltext.WaitSettings).WillReturnRows(defaultSettings())
			m.ExpectExec(sqltext.SessionSlice(sqltext.Guarded, false, 1100, key)).WithoutArgs().WillReturnError(r.err)
			checkRefused(t, advisory.Lock(context.Background(), conn, k42), r.wantErr, r.err)
			checkKept(t, conn)
		})
		t.Run("LockKeys"+r.name, func(t *testing.T) {
			t.Parallel()
			conn, m := mockConn(t)
			m.ExpectExec(sqltext.SessionSlice(sqltext.Guarded, false, 1100, keys...)).WithoutArgs().WillReturnError(r.err)
			err := advisory.LockKeys(context.Background(), conn, advisory.Int64Key(2), advisory.Int64Key(1))
			checkRefused(t, err, r.wantErr, r.err)
			checkKept(t, conn)
		})
	}
}
