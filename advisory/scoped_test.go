package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"
	"github.com/pgadvisory/pgadvisory/advisory"
)

func TestWithXactLock(t *testing.T) {
	t.Parallel()
	errWork := errors.New("work failed")
	tests := []struct {
		name     string
		opts     []advisory.Option
		lockSQL  string
		affected int64
		lockErr  error
		fnErr    error
		commit   bool
		wantErr  error
		fnCalled bool
	}{
		{name: "Wait", lockSQL: "SELECT pg_advisory_xact_lock(42)", affected: 1, commit: true, fnCalled: true},
		{name: "Try", opts: []advisory.Option{advisory.Try()}, lockSQL: "SELECT 1 WHERE pg_try_advisory_xact_lock(42)",
			affected: 1, commit: true, fnCalled: true},
		{name: "TryBusy", opts: []advisory.Option{advisory.Try()}, lockSQL: "SELECT 1 WHERE pg_try_advisory_xact_lock(42)",
			affected: 0, wantErr: advisory.ErrNotAcquired},
		{name: "TryShared", opts: []advisory.Option{advisory.Try(), advisory.Shared()},
			lockSQL: "SELECT 1 WHERE pg_try_advisory_xact_lock_shared(42)", affected: 1, commit: true, fnCalled: true},
		{name: "Timeout", opts: []advisory.Option{advisory.Timeout(1500 * time.Microsecond)},
			lockSQL:  "SET LOCAL lock_timeout = 2; SELECT pg_advisory_xact_lock(42); SET LOCAL lock_timeout TO DEFAULT",
			affected: 0, commit: true, fnCalled: true},
		{name: "TimeoutExpires", opts: []advisory.Option{advisory.Timeout(time.Second)},
			lockSQL: "SET LOCAL lock_timeout = 1000; SELECT pg_advisory_xact_lock(42); SET LOCAL lock_timeout TO DEFAULT",
			lockErr: &sqlState{"55P03", "canceling statement due to lock timeout"}, wantErr: advisory.ErrLockTimeout},
		{name: "FnFails", lockSQL: "SELECT pg_advisory_xact_lock(42)", affected: 1, fnErr: errWork,
			wantErr: errWork, fnCalled: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, m := newMock(t)
			m.ExpectBegin()
			e := m.ExpectExec(tt.lockSQL).WithoutArgs()
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
			}, tt.opts...)
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
	db, m := newMock(t)
	m.ExpectBegin()
	m.ExpectExec("SELECT pg_advisory_xact_lock(42)").WillReturnResult(rows(1))
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
	db, m := newMock(t)
	m.ExpectBegin()
	m.ExpectExec("SELECT pg_advisory_xact_lock(42)").WillReturnResult(rows(1))
	commitErr := &sqlState{"40001", "could not serialize access"}
	m.ExpectCommit().WillReturnError(commitErr)
	err := advisory.WithXactLock(context.Background(), db, k42, func(context.Context, *sql.Tx) error { return nil })
	if !errors.Is(err, commitErr) || !strings.Contains(err.Error(), "commit") {
		t.Fatalf("got %v, want the commit error", err)
	}
}

func TestWithXactLockFnEndsTx(t *testing.T) {
	t.Parallel()
	db, m := newMock(t)
	m.ExpectBegin()
	m.ExpectExec("SELECT pg_advisory_xact_lock(42)").WillReturnResult(rows(1))
	m.ExpectCommit()
	err := advisory.WithXactLock(context.Background(), db, k42, func(_ context.Context, tx *sql.Tx) error {
		return tx.Commit() // for example, to commit before answering a client
	})
	if err != nil {
		t.Fatalf("fn committed itself: %v", err)
	}
}

func TestWithSessionLock(t *testing.T) {
	t.Parallel()
	errWork := errors.New("work failed")
	tests := []struct {
		name       string
		opts       []advisory.Option
		lockSQL    string
		affected   int64
		fnErr      error
		unlockSQL  string
		released   int64
		wantErr    error
		fnCalled   bool
		discarded  bool
		lockFailed error
	}{
		{name: "Wait", lockSQL: "SELECT pg_advisory_lock(42)", affected: 1,
			unlockSQL: "SELECT 1 WHERE pg_advisory_unlock(42)", released: 1, fnCalled: true},
		{name: "TryShared", opts: []advisory.Option{advisory.Try(), advisory.Shared()},
			lockSQL: "SELECT 1 WHERE pg_try_advisory_lock_shared(42)", affected: 1,
			unlockSQL: "SELECT 1 WHERE pg_advisory_unlock_shared(42)", released: 1, fnCalled: true},
		{name: "TryBusy", opts: []advisory.Option{advisory.Try()},
			lockSQL: "SELECT 1 WHERE pg_try_advisory_lock(42)", affected: 0, wantErr: advisory.ErrNotAcquired},
		{name: "Timeout", opts: []advisory.Option{advisory.Timeout(250 * time.Millisecond)},
			lockSQL: "SET LOCAL lock_timeout = 250; SELECT pg_advisory_lock(42)", affected: 0,
			unlockSQL: "SELECT 1 WHERE pg_advisory_unlock(42)", released: 1, fnCalled: true},
		{name: "TimeoutExpires", opts: []advisory.Option{advisory.Timeout(time.Second)},
			lockSQL:    "SET LOCAL lock_timeout = 1000; SELECT pg_advisory_lock(42)",
			lockFailed: &sqlState{"55P03", "canceling statement due to lock timeout"},
			wantErr:    advisory.ErrLockTimeout, discarded: true},
		{name: "FnFails", lockSQL: "SELECT pg_advisory_lock(42)", affected: 1, fnErr: errWork,
			unlockSQL: "SELECT 1 WHERE pg_advisory_unlock(42)", released: 1, fnCalled: true, wantErr: errWork},
		{name: "LockLost", lockSQL: "SELECT pg_advisory_lock(42)", affected: 1,
			unlockSQL: "SELECT 1 WHERE pg_advisory_unlock(42)", released: 0, fnCalled: true,
			wantErr: advisory.ErrLockLost, discarded: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, m := newMock(t)
			e := m.ExpectExec(tt.lockSQL).WithoutArgs()
			if tt.lockFailed != nil {
				e.WillReturnError(tt.lockFailed)
			} else {
				e.WillReturnResult(rows(tt.affected))
			}
			if tt.unlockSQL != "" {
				m.ExpectExec(tt.unlockSQL).WithoutArgs().WillReturnResult(rows(tt.released))
			}
			if tt.discarded {
				m.ExpectClose()
			}
			called := false
			err := advisory.WithSessionLock(context.Background(), db, k42, func(context.Context, *sql.Conn) error {
				called = true
				return tt.fnErr
			}, tt.opts...)
			if called != tt.fnCalled {
				t.Errorf("fn called = %v, want %v", called, tt.fnCalled)
			}
			if tt.wantErr == nil && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("error %v does not match %v", err, tt.wantErr)
			}
			if n := db.Stats().OpenConnections; tt.discarded && n != 0 {
				t.Fatalf("%d connections open; the session should have been discarded", n)
			} else if !tt.discarded && n != 1 {
				t.Fatalf("%d connections open; the clean session should be back in the pool", n)
			}
		})
	}
}

func TestWithSessionLockPanicDiscards(t *testing.T) {
	t.Parallel()
	db, m := newMock(t)
	m.ExpectExec("SELECT pg_advisory_lock(42)").WillReturnResult(rows(1))
	m.ExpectClose()
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Fatalf("recovered %v, want the original panic", p)
			}
		}()
		_ = advisory.WithSessionLock(context.Background(), db, k42, func(context.Context, *sql.Conn) error {
			panic("boom")
		})
	}()
	if n := db.Stats().OpenConnections; n != 0 {
		t.Fatalf("%d connections open after a panic; want the session discarded", n)
	}
}

func TestWithSessionLockReleasesAfterCancel(t *testing.T) {
	t.Parallel()
	db, m := newMock(t)
	m.ExpectExec("SELECT pg_advisory_lock(42)").WillReturnResult(rows(1))
	m.ExpectExec("SELECT 1 WHERE pg_advisory_unlock(42)").WillReturnResult(rows(1))
	ctx, cancel := context.WithCancel(context.Background())
	err := advisory.WithSessionLock(ctx, db, k42, func(ctx context.Context, _ *sql.Conn) error {
		cancel()
		return ctx.Err()
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want fn's context.Canceled", err)
	}
	if n := db.Stats().OpenConnections; n != 1 {
		t.Fatalf("%d connections open; the released session should be pooled", n)
	}
}

func TestScopedBadInput(t *testing.T) {
	t.Parallel()
	db, _, err := sqlmock.New()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	xfn := func(context.Context, *sql.Tx) error { return nil }
	sfn := func(context.Context, *sql.Conn) error { return nil }
	tests := map[string]error{
		"XactNilDB":       advisory.WithXactLock(ctx, nil, k42, xfn),
		"XactNilFn":       advisory.WithXactLock(ctx, db, k42, nil),
		"SessionNilDB":    advisory.WithSessionLock(ctx, nil, k42, sfn),
		"SessionNilFn":    advisory.WithSessionLock(ctx, db, k42, nil),
		"TimeoutZero":     advisory.WithXactLock(ctx, db, k42, xfn, advisory.Timeout(0)),
		"TimeoutNegative": advisory.WithSessionLock(ctx, db, k42, sfn, advisory.Timeout(-time.Second)),
		"TimeoutTooLong":  advisory.WithXactLock(ctx, db, k42, xfn, advisory.Timeout(1000*time.Hour)),
		"TryWithTimeout":  advisory.WithXactLock(ctx, db, k42, xfn, advisory.Try(), advisory.Timeout(time.Second)),
		"NilOptionIsIgnored": func() error {
			return advisory.WithXactLock(ctx, nil, k42, xfn, nil)
		}(),
	}
	for name, err := range tests {
		if err == nil || !strings.HasPrefix(err.Error(), "advisory: ") {
			t.Errorf("%s: got %v, want a clear advisory error", name, err)
		}
	}
}

func TestWithXactLockTx(t *testing.T) {
	t.Parallel()
	t.Run("Commit", func(t *testing.T) {
		t.Parallel()
		tx, m := mockTx(t)
		m.ExpectExec("SELECT 1 WHERE pg_try_advisory_xact_lock(42)").WillReturnResult(rows(1))
		m.ExpectCommit()
		called := false
		err := advisory.WithXactLockTx(context.Background(), tx, k42, func(context.Context) error {
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
		err := advisory.WithXactLockTx(context.Background(), tx, k42, func(context.Context) error { return nil },
			advisory.Timeout(-1))
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
		if err := advisory.WithXactLockTx(context.Background(), nil, k42, func(context.Context) error { return nil }); err == nil {
			t.Fatal("want an error for a nil tx")
		}
	})
}

func TestWithSessionLockConn(t *testing.T) {
	t.Parallel()
	t.Run("Release", func(t *testing.T) {
		t.Parallel()
		conn, m := mockConn(t)
		m.ExpectExec("SELECT pg_advisory_lock_shared(42)").WillReturnResult(rows(1))
		m.ExpectExec("SELECT 1 WHERE pg_advisory_unlock_shared(42)").WillReturnResult(rows(1))
		err := advisory.WithSessionLockConn(context.Background(), conn, k42, func(context.Context) error { return nil },
			advisory.Shared())
		if err != nil {
			t.Fatal(err)
		}
		if err := conn.PingContext(context.Background()); err != nil {
			t.Fatalf("conn unusable after a clean release: %v", err)
		}
	})
	t.Run("LockLostDiscards", func(t *testing.T) {
		t.Parallel()
		conn, m := mockConn(t)
		m.ExpectExec("SELECT pg_advisory_lock(42)").WillReturnResult(rows(1))
		m.ExpectExec("SELECT 1 WHERE pg_advisory_unlock(42)").WillReturnResult(rows(0))
		m.ExpectClose()
		err := advisory.WithSessionLockConn(context.Background(), conn, k42, func(context.Context) error { return nil })
		if !errors.Is(err, advisory.ErrLockLost) {
			t.Fatalf("got %v, want ErrLockLost", err)
		}
		if err := conn.PingContext(context.Background()); !errors.Is(err, sql.ErrConnDone) {
			t.Fatalf("conn not discarded: %v", err)
		}
	})
	t.Run("BadInput", func(t *testing.T) {
		t.Parallel()
		conn, _ := mockConn(t)
		for _, err := range []error{
			advisory.WithSessionLockConn(context.Background(), nil, k42, func(context.Context) error { return nil }),
			advisory.WithSessionLockConn(context.Background(), conn, k42, nil),
			advisory.WithSessionLockConn(context.Background(), conn, k42, func(context.Context) error { return nil },
				advisory.Try(), advisory.Timeout(time.Second)),
		} {
			if err == nil {
				t.Error("want an error")
			}
		}
	})
}
