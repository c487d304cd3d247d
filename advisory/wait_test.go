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
