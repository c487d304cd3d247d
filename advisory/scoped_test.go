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
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
	"github.com/pgadvisory/pgadvisory/mock"
)

// Unit tests of what the two scopes do alike, WithXactLock (xactscope.go)
// and WithSessionLock (sessionscope.go): fn's error, bad input, a bounded
// wait that runs out, and a refused try.

func TestScopedReturnFnErrorItself(t *testing.T) {
	t.Parallel()
	errWork := errors.New("work failed")
	db, m := mock.New(t, exactSQL)
	m.ExpectBegin()
	m.ExpectExec("SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE pg_catalog.pg_try_advisory_xact_lock(42) END").WillReturnResult(rows(1))
	m.ExpectRollback()
	m.ExpectExec(trySQL("pg_catalog.pg_try_advisory_lock(42)")).WillReturnResult(rows(1))
	m.ExpectExec(releaseSQL("pg_catalog.pg_advisory_unlock(42)")).WillReturnResult(rows(1))
	if err := advisory.WithXactLock(context.Background(), db, k42, func(context.Context, *sql.Tx) error { return errWork }); err != errWork {
		t.Errorf("WithXactLock returned %#v, want fn's error itself", err)
	}
	if err := advisory.WithSessionLock(context.Background(), db, k42, func(context.Context, *sql.Conn) error { return errWork }); err != errWork {
		t.Errorf("WithSessionLock returned %#v, want fn's error itself", err)
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
		"XactNilDB":    advisory.WithXactLock(ctx, nil, k42, xfn),
		"XactNilFn":    advisory.WithXactLock(ctx, db, k42, nil),
		"SessionNilDB": advisory.WithSessionLock(ctx, nil, k42, sfn),
		"SessionNilFn": advisory.WithSessionLock(ctx, db, k42, nil),
		"WaitNegative": advisory.WithSessionLock(ctx, db, k42, sfn, advisory.Wait(-time.Second)),
		"WaitTooLong":  advisory.WithXactLock(ctx, db, k42, xfn, advisory.Wait(1000*time.Hour)),
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

// TestScopedWaitRunsOut: with Wait, the first slice is the whole
// wait, and its running out is ErrLockTimeout; it holds nothing, so a
// session scope's connection goes back to the pool.
func TestScopedWaitRunsOut(t *testing.T) {
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
			m.ExpectExec(sessionSlice(false, 150, key)).WithoutArgs().WillReturnError(errRanOut)
			expectNotHeldHere(m, false, key)
		}, call: func(ctx context.Context, db *sql.DB, called *bool) error {
			return advisory.WithSessionLock(ctx, db, k42, func(context.Context, *sql.Conn) error { *called = true; return nil }, timeout)
		}},
		{name: "WithXactLock", expect: func(m sqlmock.Sqlmock) {
			m.ExpectBegin()
			m.ExpectExec(sqltext.TryLock(sqltext.Guarded, true, false, key)).WithoutArgs().WillReturnResult(rows(0))
			m.ExpectQuery(sqltext.WaitSettings).WillReturnRows(defaultSettings())
			m.ExpectExec("ROLLBACK; BEGIN; " + xactSlice(false, 150, key)).WithoutArgs().WillReturnError(errRanOut)
			m.ExpectRollback()
		}, call: func(ctx context.Context, db *sql.DB, called *bool) error {
			return advisory.WithXactLock(ctx, db, k42, func(context.Context, *sql.Tx) error { *called = true; return nil }, timeout)
		}},
		{name: "WithXactLockTx", expect: func(m sqlmock.Sqlmock) {
			m.ExpectBegin()
			m.ExpectExec(sqltext.TryLock(sqltext.Guarded, true, false, key)).WithoutArgs().WillReturnResult(rows(0))
			m.ExpectQuery(sqltext.WaitSettings).WillReturnRows(defaultSettings())
			m.ExpectExec(sqltext.InSavepoint(false, xactSlice(false, 150, key))).WithoutArgs().WillReturnError(errRanOut)
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

// TestScopedTryRefused: a scope whose try the server refuses returns the
// refusal and never calls fn; a transaction scope rolls back.
func TestScopedTryRefused(t *testing.T) {
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
