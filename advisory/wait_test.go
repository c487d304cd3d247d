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
// runs out fails with SQLSTATE 55P03, and the wait goes on. A wait for
// session locks starts with its first slice, which the server bounds by
// the session's own lock_timeout and statement_timeout as well, and reads
// the settings after that slice ran out. A wait for one transaction lock
// reads them right after the try that found the key busy; a wait for
// several runs its first slice blind and reads them after it ran out.

// errRanOut is how the server fails a slice that ran out.
var errRanOut = &sqlState{"55P03", "canceling statement due to lock timeout"}

// defaultSettings answers sqltext.WaitSettings as a session with the
// server's defaults does.
func defaultSettings() *sqlmock.Rows { return waitSettingsRows("0", "0", "1s") }

func TestLockWaitsInSlices(t *testing.T) {
	t.Parallel()
	k1, k2 := advisory.Int64Key(1), advisory.Int64Key(2)
	tests := []struct {
		name   string
		call   func(context.Context, *sql.Conn) error
		shared bool
		keys   []sqltext.Key
	}{
		{name: "Lock", call: func(ctx context.Context, c *sql.Conn) error { return advisory.Lock(ctx, c, k42) },
			keys: []sqltext.Key{sqltext.KeyOf(k42)}},
		{name: "LockShared", call: func(ctx context.Context, c *sql.Conn) error { return advisory.LockShared(ctx, c, kPair) },
			shared: true, keys: []sqltext.Key{sqltext.KeyOf(kPair)}},
		{name: "LockKeys", call: func(ctx context.Context, c *sql.Conn) error { return advisory.LockKeys(ctx, c, k2, k1) },
			keys: []sqltext.Key{sqltext.KeyOf(k1), sqltext.KeyOf(k2)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			conn, m := mockConn(t)
			// No try: the first slice is the first statement, for one key
			// as for several, and the settings come after it ran out.
			m.ExpectExec(sqltext.FirstSessionSlice(sqltext.Guarded, tt.shared, 1100, tt.keys...)).WithoutArgs().WillReturnError(errRanOut)
			m.ExpectQuery(sqltext.WaitSettings).WillReturnRows(defaultSettings())
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

func TestXactLockWaitsUnderSavepoint(t *testing.T) {
	t.Parallel()
	k1, k2 := advisory.Int64Key(1), advisory.Int64Key(2)
	tests := []struct {
		name   string
		call   func(context.Context, *sql.Tx) error
		try    string
		shared bool
		keys   []sqltext.Key
	}{
		{name: "XactLock", call: func(ctx context.Context, tx *sql.Tx) error { return advisory.XactLock(ctx, tx, k42) },
			try: sqltext.TryLock(sqltext.Guarded, true, false, sqltext.KeyOf(k42)), keys: []sqltext.Key{sqltext.KeyOf(k42)}},
		{name: "XactLockShared", call: func(ctx context.Context, tx *sql.Tx) error { return advisory.XactLockShared(ctx, tx, k42) },
			try: sqltext.TryLock(sqltext.Guarded, true, true, sqltext.KeyOf(k42)), shared: true, keys: []sqltext.Key{sqltext.KeyOf(k42)}},
		{name: "XactLockKeys", call: func(ctx context.Context, tx *sql.Tx) error { return advisory.XactLockKeys(ctx, tx, k2, k1) },
			keys: []sqltext.Key{sqltext.KeyOf(k1), sqltext.KeyOf(k2)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tx, m := mockTx(t)
			if tt.try != "" {
				m.ExpectExec(tt.try).WithoutArgs().WillReturnResult(rows(0))
				m.ExpectQuery(sqltext.WaitSettings).WillReturnRows(defaultSettings())
			}
			slice := sqltext.GuardedXactSlice(sqltext.Guarded, tt.shared, 1100, tt.keys...)
			m.ExpectExec(sqltext.InSavepoint(false, slice)).WithoutArgs().WillReturnError(errRanOut)
			if tt.try == "" {
				// Several keys read the settings after the first slice,
				// out of the aborted savepoint.
				m.ExpectExec(sqltext.RollbackToWaitSavepoint).WithoutArgs().WillReturnResult(rows(0))
				m.ExpectQuery(sqltext.WaitSettings).WillReturnRows(defaultSettings())
			}
			m.ExpectExec(sqltext.InSavepoint(true, slice)).WithoutArgs().WillReturnResult(rows(1))
			m.ExpectCommit()
			if err := tt.call(context.Background(), tx); err != nil {
				t.Fatalf("got %v; want nil once the second slice takes the lock", err)
			}
			// The caller's transaction outlived the slice that ran out.
			if err := tx.Commit(); err != nil {
				t.Fatalf("commit after the wait: %v", err)
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
	timeout := advisory.Timeout(150 * time.Millisecond)
	tests := []struct {
		name   string
		expect func(m sqlmock.Sqlmock)
		call   func(ctx context.Context, db *sql.DB, called *bool) error
	}{
		{name: "WithSessionLock", expect: func(m sqlmock.Sqlmock) {
			// The settings are never read: the wait ends with its first
			// slice.
			m.ExpectExec(sqltext.FirstSessionSlice(sqltext.Guarded, false, 150, key)).WithoutArgs().WillReturnError(errRanOut)
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
		firstWait time.Duration // how long the server's bound lets the first slice wait
		lastMS    int           // the slice sent after the settings; 0 for none
		wantMsg   string
	}{
		// A lock_timeout shorter than a slice bounds the first slice,
		// which is then the whole wait: once the settings show it has
		// passed, nothing more is sent.
		{name: "LockTimeoutBoundsTheFirstSlice", settings: waitSettingsRows("100ms", "0", "1s"), firstWait: 100 * time.Millisecond,
			wantMsg: "advisory: lock 42: lock wait timed out: the session's lock_timeout ran out: driver: canceling statement due to lock timeout (SQLSTATE 55P03)"},
		// The first slice waits nine tenths of the statement_timeout, and
		// the slice after it what is left: the last, whose running out
		// ends the wait with the driver's error.
		{name: "StatementTimeoutBoundsTheLastSlice", settings: waitSettingsRows("0", "500ms", "1s"), firstWait: 450 * time.Millisecond, lastMS: 50,
			wantMsg: "advisory: lock 42: lock wait timed out: driver: canceling statement due to lock timeout (SQLSTATE 55P03)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			conn, m := mockConn(t, sliceSQL)
			m.ExpectExec(sqltext.FirstSessionSlice(sqltext.Guarded, false, 1100, key)).WithoutArgs().
				WillDelayFor(tt.firstWait).WillReturnError(errRanOut)
			m.ExpectQuery(sqltext.WaitSettings).WillReturnRows(tt.settings)
			if tt.lastMS > 0 {
				m.ExpectExec(sqltext.SessionSlice(sqltext.Guarded, false, int64(tt.lastMS), key)).WithoutArgs().WillReturnError(errRanOut)
			}
			err := advisory.Lock(context.Background(), conn, k42)
			if !errors.Is(err, advisory.ErrLockTimeout) {
				t.Fatalf("got %v; want ErrLockTimeout", err)
			}
			if tt.lastMS > 0 && !errors.Is(err, errRanOut) {
				t.Errorf("error %q hides the driver's error", err)
			}
			if err.Error() != tt.wantMsg {
				t.Errorf("message\n got %q\nwant %q", err, tt.wantMsg)
			}
			if err := conn.PingContext(context.Background()); err != nil {
				t.Fatalf("conn discarded after a wait that ran out: %v", err)
			}
		})
	}
}

// TestWaitCancelledDuringSliceDiscards: a slice that ctx ends may have
// been granted as it ended, so the session is discarded: the first slice,
// which is most of the waits for a key that comes free within a second,
// or one after the settings.
func TestWaitCancelledDuringSliceDiscards(t *testing.T) {
	t.Parallel()
	key := sqltext.KeyOf(k42)
	first := sqltext.FirstSessionSlice(sqltext.Guarded, false, 1100, key)
	tests := []struct {
		name  string
		slice string // the slice that ctx ends
	}{
		{"FirstSlice", first},
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
			if tt.slice != first {
				m.ExpectExec(first).WithoutArgs().WillReturnError(errRanOut)
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

// TestSessionWaitRefused: a slice that takes nothing and affects no row
// was refused, on a hot standby or on a session that bears another
// lease's mark; one more statement tells which. The wait ends holding
// nothing, and the session is kept.
func TestSessionWaitRefused(t *testing.T) {
	t.Parallel()
	key := sqltext.KeyOf(k42)
	tests := []struct {
		name    string
		why     int64 // Refusal's answer
		wantErr error
	}{
		{"Standby", sqltext.TryStandby, advisory.ErrStandby},
		{"SharedSession", sqltext.TryShared, advisory.ErrSharedSession},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			conn, m := mockConn(t)
			m.ExpectExec(sqltext.FirstSessionSlice(sqltext.Guarded, false, 1100, key)).WithoutArgs().WillReturnResult(rows(0))
			m.ExpectQuery(sqltext.Refusal).WillReturnRows(sqlmock.NewRows([]string{"why"}).AddRow(tt.why))
			err := advisory.Lock(context.Background(), conn, k42)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got %v; want %v", err, tt.wantErr)
			}
			if err := conn.PingContext(context.Background()); err != nil {
				t.Fatalf("conn discarded after a refusal that took nothing: %v", err)
			}
		})
	}
}

// TestSliceSQL checks the matcher the tests of timed slices use: exact,
// but for a slice's lock_timeout, which may fall short by less than
// sliceSlack, in a later slice's literal as in the first slice's bound
// and a transaction's slice.
func TestSliceSQL(t *testing.T) {
	t.Parallel()
	slice, first, xact := sessionSliceSQL(false, "42", 1000), firstSliceSQL(false, "42", 1000), xactSliceSQL("42", 1000)
	tests := []struct {
		name         string
		want, actual string
		ok           bool
	}{
		{"Same", slice, slice, true},
		{"JustShort", slice, sessionSliceSQL(false, "42", 999), true},
		{"ShortBySlack", slice, sessionSliceSQL(false, "42", 1000-sliceSlack), false},
		{"Longer", slice, sessionSliceSQL(false, "42", 1001), false},
		{"OtherKey", slice, sessionSliceSQL(false, "43", 1000), false},
		{"OtherStatement", slice, "SELECT 1 FROM pg_catalog.generate_series(1, CASE WHEN pg_catalog.pg_is_in_recovery() THEN 2 WHEN COALESCE(pg_catalog.current_setting('pgadvisory.lease', true), '') <> '' THEN 3 WHEN pg_catalog.pg_try_advisory_lock(42) THEN 1 ELSE 0 END)", false},
		{"FirstSame", first, first, true},
		{"FirstJustShort", first, firstSliceSQL(false, "42", 999), true},
		{"FirstShortBySlack", first, firstSliceSQL(false, "42", 1000-sliceSlack), false},
		{"FirstLonger", first, firstSliceSQL(false, "42", 1001), false},
		{"FirstForALaterSlice", first, slice, false},
		{"LaterForTheFirstSlice", slice, first, false},
		{"XactJustShort", xact, xactSliceSQL("42", 999), true},
		{"XactShortBySlack", xact, xactSliceSQL("42", 1000-sliceSlack), false},
		{"XactLonger", xact, xactSliceSQL("42", 1001), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := matchSlice(tt.want, tt.actual); (err == nil) != tt.ok {
				t.Fatalf("matchSlice(%q, %q) = %v; want a match: %v", tt.want, tt.actual, err, tt.ok)
			}
		})
	}
}
