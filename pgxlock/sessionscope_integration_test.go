package pgxlock_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
	"github.com/pgadvisory/pgadvisory/pgxlock"
)

// TestWithSessionLockIntegration checks the session scopes on pgx: fn runs
// on a session that holds the key, and the key is free once the scope
// returns, however fn ended; a busy key, a wait that runs out and a bad
// option never call fn; a connection in doubt (fn panicked, left a
// transaction open, or ctx ended) is destroyed, and a clean one goes back
// to the pool holding nothing.
func TestWithSessionLockIntegration(t *testing.T) {
	eachServer(t, func(t *testing.T, s *pgtest.Server, obs *sql.DB) {
		var closed closedConns
		pool := newPool(t, s.DSN, closed.watch)
		ctx := context.Background()
		errFn := errors.New("fn failed")
		// scope runs WithSessionLock on key with fn; ran is then fn's
		// connection, nil if fn did not run. The subtests run one at a
		// time.
		var ran *pgx.Conn
		scope := func(t *testing.T, ctx context.Context, key advisory.Key, fn func(ctx context.Context, conn *pgxpool.Conn) error, opts ...advisory.LockOption) error {
			return pgxlock.WithSessionLock(ctx, pool, key, func(ctx context.Context, conn *pgxpool.Conn) error {
				ran = conn.Conn()
				requireHeld(t, obs, key, false, pidOf(t, conn))
				return fn(ctx, conn)
			}, opts...)
		}
		ok := func(context.Context, *pgxpool.Conn) error { return nil }
		tests := []struct {
			name        string
			run         func(t *testing.T, key advisory.Key) error
			wantErr     error // nil: success
			wantRan     bool
			wantDestroy bool
			busy        bool // another session holds the key
		}{
			{name: "Runs", wantRan: true, run: func(t *testing.T, k advisory.Key) error { return scope(t, ctx, k, ok) }},
			{name: "FnFails", wantRan: true, wantErr: errFn, run: func(t *testing.T, k advisory.Key) error {
				return scope(t, ctx, k, func(context.Context, *pgxpool.Conn) error { return errFn })
			}},
			{name: "Panics", wantRan: true, wantDestroy: true, wantErr: errFn, run: func(t *testing.T, k advisory.Key) (err error) {
				defer func() {
					if r := recover(); r != errFn {
						t.Errorf("recovered %v; want fn's panic", r)
					}
					err = errFn
				}()
				return scope(t, ctx, k, func(context.Context, *pgxpool.Conn) error { panic(errFn) })
			}},
			{name: "TxLeftOpen", wantRan: true, wantDestroy: true, wantErr: errAny, run: func(t *testing.T, k advisory.Key) error {
				return scope(t, ctx, k, func(ctx context.Context, conn *pgxpool.Conn) error {
					_, err := conn.Begin(ctx)
					return err
				})
			}},
			{name: "CtxEnds", wantRan: true, wantDestroy: true, run: func(t *testing.T, k advisory.Key) error {
				ctx, cancel := context.WithCancel(ctx)
				defer cancel()
				return scope(t, ctx, k, func(context.Context, *pgxpool.Conn) error { cancel(); return nil })
			}},
			{name: "TryBusy", busy: true, wantErr: advisory.ErrNotAcquired, run: func(t *testing.T, k advisory.Key) error {
				holdElsewhere(t, pool, k)
				return scope(t, ctx, k, ok, advisory.Try())
			}},
			{name: "WaitRunsOut", busy: true, wantErr: advisory.ErrLockTimeout, run: func(t *testing.T, k advisory.Key) error {
				holdElsewhere(t, pool, k)
				return scope(t, ctx, k, ok, advisory.Wait(150*time.Millisecond))
			}},
			{name: "BadOption", wantErr: advisory.ErrBadOption, run: func(t *testing.T, k advisory.Key) error {
				return scope(t, ctx, k, ok, advisory.Wait(-time.Second))
			}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				key := randomKey()
				ran = nil
				err := tt.run(t, key)
				conn := ran
				switch {
				case tt.wantErr == nil && err != nil:
					t.Fatalf("WithSessionLock = %v; want nil", err)
				case tt.wantErr == errAny && err == nil, tt.wantErr != nil && tt.wantErr != errAny && !errors.Is(err, tt.wantErr):
					t.Fatalf("WithSessionLock = %v; want %v", err, tt.wantErr)
				case (conn != nil) != tt.wantRan:
					t.Fatalf("fn ran: %v; want %v", conn != nil, tt.wantRan)
				case conn != nil && tt.wantDestroy:
					pgtest.Await(t, "the pool to destroy fn's connection", func() (bool, error) { return closed.has(conn), nil })
				case conn != nil && (closed.has(conn) || conn.IsClosed()):
					t.Fatal("fn's connection was closed after a clean scope")
				}
				if !tt.busy {
					pgtest.AwaitFree(t, obs, key)
				}
				requireIdleClean(t, pool)
			})
		}

		t.Run("Conn", func(t *testing.T) {
			conn := connect(t, s.DSN)
			key := randomKey()
			pid := pidOf(t, conn)
			err := pgxlock.WithSessionLockConn(ctx, conn, key, func(ctx context.Context, c *pgx.Conn) error {
				if c != conn {
					t.Error("fn was given another connection")
				}
				requireHeld(t, obs, key, true, pid)
				return nil
			}, advisory.Shared())
			if err != nil {
				t.Fatal(err)
			}
			requireHeld(t, obs, key, false)
			if conn.IsClosed() {
				t.Fatal("the caller's connection was closed after a clean scope")
			}
			err = pgxlock.WithSessionLockConn(ctx, conn, key, func(ctx context.Context, c *pgx.Conn) error {
				_, err := c.Begin(ctx)
				return err
			})
			if err == nil || !conn.IsClosed() {
				t.Fatalf("fn left a transaction open: err %v, connection closed %v; want an error and the connection closed", err, conn.IsClosed())
			}
			pgtest.AwaitFree(t, obs, key)
		})
	})
}

// errAny stands for any non-nil error in a table of wanted errors.
var errAny = errors.New("any error")

// holdElsewhere holds key on a connection of pool of its own until t's
// cleanup.
func holdElsewhere(t *testing.T, pool *pgxpool.Pool, key advisory.Key) {
	t.Helper()
	c := acquire(t, pool)
	if err := pgxlock.Lock(context.Background(), c, key); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pgxlock.Unlock(context.Background(), c, key); err != nil {
			t.Error(err)
		}
	})
}

// TestLockKeysIntegration checks the multi-key calls: LockKeys takes every
// key, duplicates once, UnlockKeys releases them, and XactLockKeys holds
// them until the transaction ends.
func TestLockKeysIntegration(t *testing.T) {
	eachServer(t, func(t *testing.T, s *pgtest.Server, obs *sql.DB) {
		ctx := context.Background()
		pool := newPool(t, s.DSN, nil)
		keys := []advisory.Key{randomKey(), randomKey(), randomKey()}
		with := append([]advisory.Key{keys[2]}, keys...) // a duplicate

		c := acquire(t, pool)
		pid := pidOf(t, c)
		if err := pgxlock.LockKeys(ctx, c, with...); err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			requireHeld(t, obs, k, false, pid)
		}
		if err := pgxlock.UnlockKeys(ctx, c, with...); err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			requireHeld(t, obs, k, false)
		}
		if err := pgxlock.LockKeys(ctx, c); err == nil {
			t.Error("LockKeys with no keys succeeded")
		}

		tx := begin(t, pool)
		if err := pgxlock.XactLockKeys(ctx, tx, with...); err != nil {
			t.Fatal(err)
		}
		txPID := pidOf(t, tx)
		for _, k := range keys {
			requireHeld(t, obs, k, false, txPID)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			requireHeld(t, obs, k, false)
		}
	})
}
