package advisory_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/mock"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// Unit tests of the session scopes, WithSessionLock and
// WithSessionLockConn (sessionscope.go). What both scopes do alike is in
// scoped_test.go.

func TestWithSessionLock(t *testing.T) {
	t.Parallel()
	errWork := errors.New("work failed")
	const try42 = "SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE pg_catalog.pg_try_advisory_lock(42) END"
	tests := []struct {
		name       string
		opts       []advisory.LockOption
		busy       bool // the try finds the key busy, the wait reads the settings and goes on in slices
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
		{name: "Wait", lockSQL: try42, affected: 1,
			unlockSQL: releaseSQL("pg_catalog.pg_advisory_unlock(42)"), released: 1, fnCalled: true},
		{name: "WaitBusy", busy: true, lockSQL: sessionSliceSQL(false, "42", 1100), affected: 1,
			unlockSQL: releaseSQL("pg_catalog.pg_advisory_unlock(42)"), released: 1, fnCalled: true},
		{name: "TryShared", opts: []advisory.LockOption{advisory.Try(), advisory.Shared()},
			lockSQL: "SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE pg_catalog.pg_try_advisory_lock_shared(42) END", affected: 1,
			unlockSQL: releaseSQL("pg_catalog.pg_advisory_unlock_shared(42)"), released: 1, fnCalled: true},
		{name: "TryBusy", opts: []advisory.LockOption{advisory.Try()},
			lockSQL: try42, affected: 0, wantErr: advisory.ErrNotAcquired},
		// A Timeout shorter than a slice bounds the first slice after the
		// try, which is then the whole wait.
		{name: "Timeout", opts: []advisory.LockOption{advisory.Wait(250 * time.Millisecond)}, busy: true,
			lockSQL: sessionSliceSQL(false, "42", 250), affected: 1,
			unlockSQL: releaseSQL("pg_catalog.pg_advisory_unlock(42)"), released: 1, fnCalled: true},
		// A slice that runs out, and the check after it, find nothing
		// held: the session goes back to the pool.
		{name: "TimeoutExpires", opts: []advisory.LockOption{advisory.Wait(time.Second)}, busy: true,
			lockSQL:    sessionSliceSQL(false, "42", 1000),
			lockFailed: &sqlState{"55P03", "canceling statement due to lock timeout"},
			wantErr:    advisory.ErrLockTimeout},
		{name: "FnFails", lockSQL: try42, affected: 1, fnErr: errWork,
			unlockSQL: releaseSQL("pg_catalog.pg_advisory_unlock(42)"), released: 1, fnCalled: true, wantErr: errWork},
		{name: "LockLost", lockSQL: try42, affected: 1,
			unlockSQL: releaseSQL("pg_catalog.pg_advisory_unlock(42)"), released: 0, fnCalled: true,
			wantErr: advisory.ErrLockLost, discarded: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, m := mock.New(t, sliceSQL)
			if tt.busy {
				m.ExpectExec(try42).WithoutArgs().WillReturnResult(rows(0))
				m.ExpectQuery(waitSettingsSQL).WillReturnRows(waitSettingsRows("0", "0", "1s"))
			}
			e := m.ExpectExec(tt.lockSQL).WithoutArgs()
			if tt.lockFailed != nil {
				e.WillReturnError(tt.lockFailed)
				if tt.busy {
					// A slice that ran out may hold the key.
					expectNotHeldHere(m, false, sliceKey("42"))
				}
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
			}, as[advisory.SessionOption](tt.opts)...)
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

// TestWithSessionLockStrayCancel: a cancel request sent for an earlier
// statement can land on the release instead (drivers send them on a
// connection of their own). The session is alive and holds the lock, so
// the release runs again, and the scope succeeds.
func TestWithSessionLockStrayCancel(t *testing.T) {
	t.Parallel()
	db, m := mock.New(t, exactSQL)
	m.ExpectExec(trySQL("pg_catalog.pg_try_advisory_lock(42)")).WithoutArgs().WillReturnResult(rows(1))
	cancelled := &sqlState{"57014", "canceling statement due to user request"}
	m.ExpectExec(releaseSQL("pg_catalog.pg_advisory_unlock(42)")).WithoutArgs().WillReturnError(cancelled)
	m.ExpectExec(releaseSQL("pg_catalog.pg_advisory_unlock(42)")).WithoutArgs().WillReturnResult(rows(1))
	err := advisory.WithSessionLock(context.Background(), db, k42, func(context.Context, *sql.Conn) error { return nil })
	if err != nil {
		t.Fatalf("WithSessionLock = %v; want nil after the release ran again", err)
	}
	if n := db.Stats().OpenConnections; n != 1 {
		t.Fatalf("%d connections open; the clean session should be back in the pool", n)
	}
}

func TestWithSessionLockPanicDiscards(t *testing.T) {
	t.Parallel()
	db, m := mock.New(t, exactSQL)
	m.ExpectExec(trySQL("pg_catalog.pg_try_advisory_lock(42)")).WillReturnResult(rows(1))
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
	// The session is discarded beside the panic, not before it goes on.
	awaitNoConns(t, db)
}

func TestWithSessionLockDiscardsWhenContextEndsDuringFn(t *testing.T) {
	t.Parallel()
	db, m := mock.New(t, exactSQL)
	m.ExpectExec(trySQL("pg_catalog.pg_try_advisory_lock(42)")).WillReturnResult(rows(1))
	m.ExpectClose() // no unlock: closing the session releases the lock for certain
	ctx, cancel := context.WithCancel(context.Background())
	err := advisory.WithSessionLock(ctx, db, k42, func(ctx context.Context, _ *sql.Conn) error {
		cancel()
		return ctx.Err()
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want fn's context.Canceled", err)
	}
	if n := db.Stats().OpenConnections; n != 0 {
		t.Fatalf("%d connections open; the session should have been discarded", n)
	}
}

// TestWithSessionLockPanicWithOpenTx checks that a panic in fn propagates
// promptly even when fn left a transaction open on conn, begun on a
// context the scope cannot end: the scope's release finds the transaction,
// closes the driver's connection at once (which ends the session, and the
// lock with it), and the *sql.Conn is freed when the transaction ends.
func TestWithSessionLockPanicWithOpenTx(t *testing.T) {
	t.Parallel()
	db, m := mock.New(t, exactSQL)
	m.MatchExpectationsInOrder(false)
	m.ExpectExec(trySQL("pg_catalog.pg_try_advisory_lock(42)")).WillReturnResult(rows(1))
	m.ExpectBegin()
	m.ExpectExec(releaseSQL("pg_catalog.pg_advisory_unlock(42)")).WillReturnResult(rows(3)) // held, and a transaction is open
	m.ExpectClose()
	var tx *sql.Tx
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Fatalf("recovered %v, want the original panic", p)
			}
		}()
		_ = advisory.WithSessionLock(context.Background(), db, k42, func(ctx context.Context, conn *sql.Conn) error {
			var err error
			if tx, err = conn.BeginTx(context.Background(), nil); err != nil {
				return err
			}
			panic("boom")
		})
	}()
	// The panic arrived although the transaction is still open; ending it
	// frees the connection, which was closed under it.
	_ = tx.Rollback()
	awaitNoConns(t, db)
}

// awaitNoConns waits until db has no open connection: a discarded
// session's close can come a moment after the call that discarded it.
func awaitNoConns(t *testing.T, db *sql.DB) {
	t.Helper()
	pgtest.Await(t, "every connection to close", func() (bool, error) { return db.Stats().OpenConnections == 0, nil })
}

func TestWithSessionLockConn(t *testing.T) {
	t.Parallel()
	t.Run("Release", func(t *testing.T) {
		t.Parallel()
		conn, m := mockConn(t)
		m.ExpectExec(trySQL("pg_catalog.pg_try_advisory_lock_shared(42)")).WillReturnResult(rows(1))
		m.ExpectExec(endSQL("pg_catalog.pg_advisory_unlock_shared(42)")).WillReturnResult(rows(1))
		err := advisory.WithSessionLockConn(context.Background(), conn, k42, func(context.Context, *sql.Conn) error { return nil },
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
		m.ExpectExec(trySQL("pg_catalog.pg_try_advisory_lock(42)")).WillReturnResult(rows(1))
		m.ExpectExec(endSQL("pg_catalog.pg_advisory_unlock(42)")).WillReturnResult(rows(0))
		m.ExpectClose()
		err := advisory.WithSessionLockConn(context.Background(), conn, k42, func(context.Context, *sql.Conn) error { return nil })
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
			advisory.WithSessionLockConn(context.Background(), nil, k42, func(context.Context, *sql.Conn) error { return nil }),
			advisory.WithSessionLockConn(context.Background(), conn, k42, nil),
			advisory.WithSessionLockConn(context.Background(), conn, k42, func(context.Context, *sql.Conn) error { return nil },
				advisory.Try(), advisory.Wait(time.Second)),
		} {
			if err == nil {
				t.Error("want an error")
			}
		}
	})
}
