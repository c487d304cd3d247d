package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
	"github.com/pgadvisory/pgadvisory/mock"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// Unit tests of the transaction scope, WithXactLock and WithXactLockTx,
// and of the transaction contexts (xactscope.go). What both scopes do
// alike is in scoped_test.go.

func TestWithXactLock(t *testing.T) {
	t.Parallel()
	errWork := errors.New("work failed")
	const try42 = "SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE pg_catalog.pg_try_advisory_xact_lock(42) END"
	tests := []struct {
		name     string
		opts     []advisory.LockOption
		busy     bool // the try finds the key busy: the wait reads the settings, then rolls back and waits in a new transaction, in one statement
		lockSQL  string
		affected int64
		lockErr  error
		fnErr    error
		commit   bool
		wantErr  error
		fnCalled bool
	}{
		{name: "Wait", lockSQL: try42, affected: 1, commit: true, fnCalled: true},
		{name: "WaitBusy", busy: true, lockSQL: xactSliceSQL("42", 1100), affected: 1, commit: true, fnCalled: true},
		{name: "Try", opts: []advisory.LockOption{advisory.Try()}, lockSQL: try42,
			affected: 1, commit: true, fnCalled: true},
		{name: "TryBusy", opts: []advisory.LockOption{advisory.Try()}, lockSQL: try42,
			affected: 0, wantErr: advisory.ErrNotAcquired},
		{name: "TryShared", opts: []advisory.LockOption{advisory.Try(), advisory.Shared()},
			lockSQL: "SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE pg_catalog.pg_try_advisory_xact_lock_shared(42) END", affected: 1, commit: true, fnCalled: true},
		{name: "Timeout", opts: []advisory.LockOption{advisory.Wait(250 * time.Millisecond)}, busy: true,
			lockSQL:  xactSliceSQL("42", 250),
			affected: 1, commit: true, fnCalled: true},
		{name: "TimeoutExpires", opts: []advisory.LockOption{advisory.Wait(time.Second)}, busy: true,
			lockSQL: xactSliceSQL("42", 1000),
			lockErr: &sqlState{"55P03", "canceling statement due to lock timeout"}, wantErr: advisory.ErrLockTimeout},
		{name: "FnFails", lockSQL: try42, affected: 1, fnErr: errWork,
			wantErr: errWork, fnCalled: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, m := mock.New(t, sliceSQL)
			m.ExpectBegin()
			lockSQL := tt.lockSQL
			if tt.busy {
				m.ExpectExec(try42).WithoutArgs().WillReturnResult(rows(0))
				m.ExpectQuery(waitSettingsSQL).WillReturnRows(waitSettingsRows("0", "0", "1s"))
				lockSQL = "ROLLBACK; BEGIN; " + lockSQL
			}
			e := m.ExpectExec(lockSQL).WithoutArgs()
			if tt.lockErr != nil {
				e.WillReturnError(tt.lockErr)
			} else {
				e.WillReturnResult(rows(tt.affected))
			}
			if tt.fnCalled {
				m.ExpectExec("UPDATE jobs SET done = true").WillReturnResult(rows(1))
			}
			if tt.commit {
				m.ExpectCommit()
			} else {
				m.ExpectRollback()
			}
			called := false
			err := advisory.WithXactLock(context.Background(), db, k42, func(ctx context.Context, tx *sql.Tx) error {
				called = true
				if _, err := tx.ExecContext(ctx, "UPDATE jobs SET done = true"); err != nil {
					return err
				}
				return tt.fnErr
			}, as[advisory.XactOption](tt.opts)...)
			if called != tt.fnCalled {
				t.Errorf("fn called = %v, want %v", called, tt.fnCalled)
			}
			if tt.wantErr == nil && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("error %v does not match %v", err, tt.wantErr)
			}
		})
	}
}

func TestWithXactLockPanicRollsBack(t *testing.T) {
	t.Parallel()
	db, m := mock.New(t, exactSQL)
	m.ExpectBegin()
	m.ExpectExec("SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE pg_catalog.pg_try_advisory_xact_lock(42) END").WillReturnResult(rows(1))
	m.ExpectRollback()
	defer func() {
		if p := recover(); p != "boom" {
			t.Fatalf("recovered %v, want the original panic", p)
		}
	}()
	_ = advisory.WithXactLock(context.Background(), db, k42, func(context.Context, *sql.Tx) error {
		panic("boom")
	})
	t.Fatal("WithXactLock swallowed the panic")
}

func TestWithXactLockCommitFails(t *testing.T) {
	t.Parallel()
	db, m := mock.New(t, exactSQL)
	m.ExpectBegin()
	m.ExpectExec("SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE pg_catalog.pg_try_advisory_xact_lock(42) END").WillReturnResult(rows(1))
	commitErr := &sqlState{"40001", "could not serialize access"}
	m.ExpectCommit().WillReturnError(commitErr)
	err := advisory.WithXactLock(context.Background(), db, k42, func(context.Context, *sql.Tx) error { return nil })
	if !errors.Is(err, commitErr) || !strings.Contains(err.Error(), "commit") {
		t.Fatalf("got %v, want the commit error", err)
	}
}

func TestWithXactLockCommitEarly(t *testing.T) {
	t.Parallel()
	t.Run("Commits", func(t *testing.T) {
		t.Parallel()
		db, m := mock.New(t, exactSQL)
		m.ExpectBegin()
		m.ExpectExec("SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE pg_catalog.pg_try_advisory_xact_lock(42) END").WillReturnResult(rows(1))
		m.ExpectCommit()
		err := advisory.WithXactLock(context.Background(), db, k42, func(ctx context.Context, _ *sql.Tx) error {
			if err := advisory.CommitEarly(ctx); err != nil {
				return err
			}
			return advisory.CommitEarly(ctx) // a second call returns the first result
		})
		if err != nil {
			t.Fatalf("fn committed early: %v", err)
		}
	})
	t.Run("CommitFails", func(t *testing.T) {
		t.Parallel()
		db, m := mock.New(t, exactSQL)
		m.ExpectBegin()
		m.ExpectExec("SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE pg_catalog.pg_try_advisory_xact_lock(42) END").WillReturnResult(rows(1))
		commitErr := &sqlState{"40001", "could not serialize access"}
		m.ExpectCommit().WillReturnError(commitErr)
		var early error
		err := advisory.WithXactLock(context.Background(), db, k42, func(ctx context.Context, _ *sql.Tx) error {
			early = advisory.CommitEarly(ctx)
			return nil
		})
		if !errors.Is(early, commitErr) || !errors.Is(err, commitErr) {
			t.Fatalf("CommitEarly = %v, WithXactLock = %v; both should report the commit failure", early, err)
		}
	})
	t.Run("EndedContextRollsBack", func(t *testing.T) {
		t.Parallel()
		db, m := mock.New(t, exactSQL)
		m.ExpectBegin()
		m.ExpectExec("SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE pg_catalog.pg_try_advisory_xact_lock(42) END").WillReturnResult(rows(1))
		m.ExpectRollback()
		var early error
		err := advisory.WithXactLock(context.Background(), db, k42, func(ctx context.Context, _ *sql.Tx) error {
			early = advisory.CommitEarly(endedAsCallReturns{ctx})
			return nil
		})
		if !errors.Is(early, context.Canceled) || !errors.Is(err, context.Canceled) {
			t.Fatalf("CommitEarly = %v, WithXactLock = %v; both should match context.Canceled", early, err)
		}
	})
	t.Run("WithXactLockNeverCommitsOnceCtxEnded", func(t *testing.T) {
		t.Parallel()
		db, m := mock.New(t, exactSQL)
		m.ExpectBegin()
		m.ExpectExec("SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE pg_catalog.pg_try_advisory_xact_lock(42) END").WillReturnResult(rows(1))
		m.ExpectRollback()
		ctx, cancel := context.WithCancel(context.Background())
		err := advisory.WithXactLock(ctx, db, k42, func(context.Context, *sql.Tx) error {
			cancel()
			return nil
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want an error matching context.Canceled", err)
		}
		// database/sql rolls back a transaction whose context ended on
		// a goroutine of its own, which may reach the driver after
		// WithXactLock returned.
		pgtest.Await(t, "database/sql's rollback", func() (bool, error) { return m.ExpectationsWereMet() == nil, nil })
	})
	t.Run("OutsideAScope", func(t *testing.T) {
		t.Parallel()
		if err := advisory.CommitEarly(context.Background()); err == nil {
			t.Fatal("CommitEarly outside WithXactLock succeeded")
		}
	})
}

// TestWithXactLockNeverGuessesTheOutcome checks that a transaction fn ended
// behind WithXactLock's back is reported, not taken for a commit.
func TestWithXactLockNeverGuessesTheOutcome(t *testing.T) {
	t.Parallel()
	for name, end := range map[string]func(*sql.Tx) error{
		"RolledBack": (*sql.Tx).Rollback,
		"Committed":  (*sql.Tx).Commit,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db, m := mock.New(t, exactSQL)
			m.ExpectBegin()
			m.ExpectExec("SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE pg_catalog.pg_try_advisory_xact_lock(42) END").WillReturnResult(rows(1))
			if name == "RolledBack" {
				m.ExpectRollback()
			} else {
				m.ExpectCommit()
			}
			err := advisory.WithXactLock(context.Background(), db, k42, func(_ context.Context, tx *sql.Tx) error {
				return end(tx)
			})
			if !errors.Is(err, sql.ErrTxDone) {
				t.Fatalf("got %v, want an error matching sql.ErrTxDone", err)
			}
		})
	}
}

func TestWithXactLockTx(t *testing.T) {
	t.Parallel()
	t.Run("Commit", func(t *testing.T) {
		t.Parallel()
		tx, m := mockTx(t)
		m.ExpectExec("SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE pg_catalog.pg_try_advisory_xact_lock(42) END").WillReturnResult(rows(1))
		m.ExpectCommit()
		called := false
		err := advisory.WithXactLockTx(context.Background(), tx, k42, func(context.Context, *sql.Tx) error {
			called = true
			return nil
		}, advisory.Try())
		if err != nil || !called {
			t.Fatalf("err = %v, called = %v", err, called)
		}
	})
	t.Run("BadOptionsStillEndTheTx", func(t *testing.T) {
		t.Parallel()
		tx, m := mockTx(t)
		m.ExpectRollback()
		err := advisory.WithXactLockTx(context.Background(), tx, k42, func(context.Context, *sql.Tx) error { return nil },
			advisory.Wait(-1))
		if err == nil {
			t.Fatal("want an error for a negative timeout")
		}
		if err := tx.Commit(); !errors.Is(err, sql.ErrTxDone) {
			t.Fatalf("tx still open after WithXactLockTx: %v", err)
		}
	})
	t.Run("NilFnStillEndsTheTx", func(t *testing.T) {
		t.Parallel()
		tx, m := mockTx(t)
		m.ExpectRollback()
		if err := advisory.WithXactLockTx(context.Background(), tx, k42, nil); err == nil {
			t.Fatal("want an error for a nil fn")
		}
	})
	t.Run("NilTx", func(t *testing.T) {
		t.Parallel()
		if err := advisory.WithXactLockTx(context.Background(), nil, k42, func(context.Context, *sql.Tx) error { return nil }); err == nil {
			t.Fatal("want an error for a nil tx")
		}
	})
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
			slice := "ROLLBACK; BEGIN; " + xactSlice(false, 1100, key)
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

func TestTxContext(t *testing.T) {
	t.Parallel()
	if tx, ok := advisory.TxFromContext(context.Background()); ok || tx != nil {
		t.Errorf("empty context gave %v, %v", tx, ok)
	}
	if _, ok := advisory.TxFromContext(advisory.NewTxContext(context.Background(), nil)); ok {
		t.Error("a nil *sql.Tx was reported present")
	}
	type otherKey struct{}
	if _, ok := advisory.TxFromContext(context.WithValue(context.Background(), otherKey{}, &sql.Tx{})); ok {
		t.Error("a value under another key was found")
	}
	tx := &sql.Tx{}
	got, ok := advisory.TxFromContext(advisory.NewTxContext(context.Background(), tx))
	if !ok || got != tx {
		t.Errorf("got %p, %v; want %p, true", got, ok, tx)
	}
}
