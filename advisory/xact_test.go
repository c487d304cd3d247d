package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
	"github.com/pgadvisory/pgadvisory/mock"
)

func TestXactSQL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		call     func(context.Context, *sql.Tx) (bool, error)
		sql      string
		affected int64
		want     bool
	}{
		{"XactLock", xactAcquired(func(ctx context.Context, tx *sql.Tx) error { return advisory.XactLock(ctx, tx, k42) }),
			"SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE pg_catalog.pg_try_advisory_xact_lock(42) END", 1, true},
		{"XactLockPair", xactAcquired(func(ctx context.Context, tx *sql.Tx) error { return advisory.XactLock(ctx, tx, kPair) }),
			"SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE pg_catalog.pg_try_advisory_xact_lock(1,-2) END", 1, true},
		{"XactLockShared", xactAcquired(func(ctx context.Context, tx *sql.Tx) error { return advisory.XactLockShared(ctx, tx, k42) }),
			"SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE pg_catalog.pg_try_advisory_xact_lock_shared(42) END", 1, true},
		{"TryXactLockTaken", func(ctx context.Context, tx *sql.Tx) (bool, error) { return advisory.TryXactLock(ctx, tx, k42) },
			"SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE pg_catalog.pg_try_advisory_xact_lock(42) END", 1, true},
		{"TryXactLockBusy", func(ctx context.Context, tx *sql.Tx) (bool, error) { return advisory.TryXactLock(ctx, tx, k42) },
			"SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE pg_catalog.pg_try_advisory_xact_lock(42) END", 0, false},
		{"TryXactLockShared", func(ctx context.Context, tx *sql.Tx) (bool, error) {
			return advisory.TryXactLockShared(ctx, tx, kPair)
		}, "SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE pg_catalog.pg_try_advisory_xact_lock_shared(1,-2) END", 1, true},
		{"XactLockKeys", xactAcquired(func(ctx context.Context, tx *sql.Tx) error {
			return advisory.XactLockKeys(ctx, tx, k42, kPair, k42, kMin)
		}), inSavepointSQL(false, guardedTimeoutSQL(counted("SELECT pg_catalog.pg_advisory_xact_lock(k) FROM (VALUES (-9223372036854775808),(42)) AS k(k) "+
			"UNION ALL SELECT pg_catalog.pg_advisory_xact_lock(a,b) FROM (VALUES (1,-2)) AS p(a,b)"), 1100)), 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tx, m := mockTx(t)
			m.ExpectExec(tt.sql).WithoutArgs().WillReturnResult(rows(tt.affected))
			m.ExpectRollback()
			got, err := tt.call(context.Background(), tx)
			if err != nil || got != tt.want {
				t.Fatalf("got %v, %v; want %v, nil", got, err, tt.want)
			}
		})
	}
}

func xactAcquired(f func(context.Context, *sql.Tx) error) func(context.Context, *sql.Tx) (bool, error) {
	return func(ctx context.Context, tx *sql.Tx) (bool, error) {
		if err := f(ctx, tx); err != nil {
			return false, err
		}
		return true, nil
	}
}

// TestXactErrors checks how a wait in a transaction reports the errors a
// slice of it can end with. A lock_timeout ends a slice, not the wait,
// until the session's own lock_timeout runs out: here, at the second slice.
func TestXactErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"LockTimeout", &sqlState{"55P03", "canceling statement due to lock timeout"}, advisory.ErrLockTimeout},
		{"Deadlock", &sqlState{"40P01", "deadlock detected"}, advisory.ErrDeadlock},
		{"LockTableFull", &sqlState{"53200", "out of shared memory"}, advisory.ErrLockTableFull},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tx, m := mockTx(t, sliceSQL)
			m.ExpectExec("SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE pg_catalog.pg_try_advisory_xact_lock(42) END").WillReturnResult(rows(0))
			ranOut := tt.err.(*sqlState).code == "55P03"
			if ranOut {
				// The session's lock_timeout bounds the wait: its only
				// slice is the last, and its running out ends the wait.
				m.ExpectQuery(waitSettingsSQL).WillReturnRows(waitSettingsRows("1s", "0", "1s"))
				m.ExpectExec(inSavepointSQL(false, xactSliceBackSQL("42", 1000, 1000))).WillReturnError(tt.err)
				m.ExpectExec("ROLLBACK TO SAVEPOINT pgadvisory_wait; RELEASE SAVEPOINT pgadvisory_wait").WillReturnResult(rows(0))
			} else {
				m.ExpectQuery(waitSettingsSQL).WillReturnRows(waitSettingsRows("0", "0", "1s"))
				m.ExpectExec(inSavepointSQL(false, xactSliceSQL("42", 1100))).WillReturnError(tt.err)
			}
			m.ExpectRollback()
			err := advisory.XactLock(context.Background(), tx, k42)
			if !errors.Is(err, tt.want) || !errors.Is(err, tt.err) {
				t.Fatalf("error %q should match %v and keep the driver's error", err, tt.want)
			}
			var st interface{ SQLState() string }
			if !errors.As(err, &st) || st.SQLState() != tt.err.(*sqlState).code {
				t.Fatalf("errors.As cannot reach the SQLSTATE of %q", err)
			}
		})
	}
}

// TestXactLockRunsOutLeavesSavepoint: in the caller's transaction, a wait
// that runs out (here the session's lock_timeout, since XactLock has no
// Timeout) rolls back to the wait's savepoint and releases it, so that
// the transaction is as it was and goes on.
func TestXactLockRunsOutLeavesSavepoint(t *testing.T) {
	t.Parallel()
	tx, m := mockTx(t, sliceSQL)
	key := sqltext.KeyOf(k42)
	ranOut := &sqlState{"55P03", "canceling statement due to lock timeout"}
	m.ExpectExec(sqltext.TryLock(sqltext.Guarded, true, false, key)).WithoutArgs().WillReturnResult(rows(0))
	m.ExpectQuery(sqltext.WaitSettings).WillReturnRows(waitSettingsRows("100ms", "0", "1s"))
	m.ExpectExec(sqltext.InSavepoint(false, sqltext.GuardedXactKeySlice(sqltext.Guarded, false, 100, 100, key))).WithoutArgs().WillReturnError(ranOut)
	m.ExpectExec(sqltext.LeaveWaitSavepoint).WithoutArgs().WillReturnResult(rows(0))
	m.ExpectExec("UPDATE jobs SET skipped = true").WillReturnResult(rows(1))
	m.ExpectCommit()
	err := advisory.XactLock(context.Background(), tx, k42)
	if !errors.Is(err, advisory.ErrLockTimeout) || !errors.Is(err, ranOut) {
		t.Fatalf("got %v; want ErrLockTimeout, with the driver's error", err)
	}
	const want = "advisory: xact lock 42: lock wait timed out: driver: canceling statement due to lock timeout (SQLSTATE 55P03)"
	if err.Error() != want {
		t.Errorf("message\n got %q\nwant %q", err, want)
	}
	// The caller's transaction is usable after the wait.
	if _, err := tx.Exec("UPDATE jobs SET skipped = true"); err != nil {
		t.Fatalf("exec after the wait: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit after the wait: %v", err)
	}
}

func TestXactSuccessAfterContextEnded(t *testing.T) {
	t.Parallel()
	tx, m := mockTx(t)
	m.ExpectExec("SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE pg_catalog.pg_try_advisory_xact_lock(42) END").WillReturnResult(rows(1))
	m.ExpectRollback()
	err := advisory.XactLock(endedAsCallReturns{context.Background()}, tx, k42)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want an error matching context.Canceled", err)
	}
}

func TestXactBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx, m := mockTx(t)
	m.ExpectRollback()
	for name, call := range map[string]func() error{
		"XactLock":          func() error { return advisory.XactLock(ctx, nil, k42) },
		"XactLockShared":    func() error { return advisory.XactLockShared(ctx, nil, k42) },
		"TryXactLock":       func() error { _, err := advisory.TryXactLock(ctx, nil, k42); return err },
		"TryXactLockShared": func() error { _, err := advisory.TryXactLockShared(ctx, nil, k42); return err },
		"XactLockKeys":      func() error { return advisory.XactLockKeys(ctx, nil, k42) },
		"XactLockKeysNone":  func() error { return advisory.XactLockKeys(ctx, tx) },
	} {
		if err := call(); err == nil {
			t.Errorf("%s: no error for bad input", name)
		}
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
			slice := xactSlice(tt.shared, 1100, tt.keys...)
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

// TestXactWaitRefused: a guarded transaction slice that the server refuses
// took nothing. In a transaction of the caller's, the wait rolls back to
// its savepoint and releases it (LeaveWaitSavepoint), which leaves the
// transaction as it was, usable; in a transaction scope's own, it rolls
// back and begins the next transaction, and the scope rolls that back.
// Either way the wait returns the refusal.
func TestXactWaitRefused(t *testing.T) {
	t.Parallel()
	key := sqltext.KeyOf(k42)
	keys := []sqltext.Key{sqltext.KeyOf(advisory.Int64Key(1)), sqltext.KeyOf(advisory.Int64Key(2))}
	for _, r := range refusals {
		t.Run("XactLock"+r.name, func(t *testing.T) {
			t.Parallel()
			tx, m := mockTx(t)
			m.ExpectExec(sqltext.TryLock(sqltext.Guarded, true, false, key)).WithoutArgs().WillReturnResult(rows(0))
			m.ExpectQuery(sqltext.WaitSettings).WillReturnRows(defaultSettings())
			m.ExpectExec(sqltext.InSavepoint(false, xactSlice(false, 1100, key))).WithoutArgs().WillReturnError(r.err)
			m.ExpectExec(sqltext.LeaveWaitSavepoint).WithoutArgs().WillReturnResult(rows(0))
			m.ExpectExec("UPDATE jobs SET done = true").WillReturnResult(rows(1))
			m.ExpectCommit()
			checkRefused(t, advisory.XactLock(context.Background(), tx, k42), r.wantErr, r.err)
			// The caller's transaction is as it was before the wait.
			if _, err := tx.ExecContext(context.Background(), "UPDATE jobs SET done = true"); err != nil {
				t.Fatalf("the transaction after a refused slice: %v", err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatalf("commit after a refused slice: %v", err)
			}
		})
		t.Run("XactLockKeys"+r.name, func(t *testing.T) {
			t.Parallel()
			tx, m := mockTx(t)
			m.ExpectExec(sqltext.InSavepoint(false, xactSlice(false, 1100, keys...))).WithoutArgs().WillReturnError(r.err)
			m.ExpectExec(sqltext.LeaveWaitSavepoint).WithoutArgs().WillReturnResult(rows(0))
			m.ExpectRollback()
			err := advisory.XactLockKeys(context.Background(), tx, advisory.Int64Key(2), advisory.Int64Key(1))
			checkRefused(t, err, r.wantErr, r.err)
		})
		t.Run("WithXactLock"+r.name, func(t *testing.T) {
			t.Parallel()
			db, m := mock.New(t, exactSQL)
			m.ExpectBegin()
			m.ExpectExec(sqltext.TryLock(sqltext.Guarded, true, false, key)).WithoutArgs().WillReturnResult(rows(0))
			m.ExpectQuery(sqltext.WaitSettings).WillReturnRows(defaultSettings())
			m.ExpectExec("ROLLBACK; BEGIN; " + xactSlice(false, 1100, key)).WithoutArgs().WillReturnError(r.err)
			m.ExpectExec("ROLLBACK; BEGIN").WithoutArgs().WillReturnResult(rows(0))
			m.ExpectRollback()
			err := advisory.WithXactLock(context.Background(), db, k42, func(context.Context, *sql.Tx) error {
				t.Error("fn called under a refused lock")
				return nil
			})
			checkRefused(t, err, r.wantErr, r.err)
		})
	}
}
