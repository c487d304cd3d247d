package mock_test

import (
	"context"
	"database/sql"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/mock"
)

// A driftCase runs one advisory function against a mock prepared with the
// matching helper. It lays down its expectations, makes the call, and
// checks what the call returned; the test then requires that every
// expectation was met.
type driftCase struct {
	fn   string // the advisory function the case calls
	name string
	run  func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock)
}

// driftKeys covers both key spaces, their extremes and a hashed name.
var driftKeys = []advisory.Key{
	advisory.Int64Key(42),
	advisory.Int64Key(math.MinInt64),
	advisory.Int64Key(math.MaxInt64),
	advisory.PairKey(1, 2),
	advisory.PairKey(math.MinInt32, -1),
	advisory.NameKey(7, "nightly-report"),
}

// driftKeySet is out of order, mixes the key spaces and repeats a key, as
// callers may.
var driftKeySet = []advisory.Key{
	advisory.PairKey(3, 1), advisory.Int64Key(9), advisory.PairKey(-2, 5),
	advisory.Int64Key(-1), advisory.Int64Key(9),
}

// errBoom is what fn returns in the cases where fn fails.
var errBoom = errors.New("boom")

// driftOptions are the option sets the scoped helpers are run with.
var driftOptions = []struct {
	name string
	opts []any // each helper runs with those whose options it takes; see kind
	try  bool
}{
	{name: "Default"},
	{name: "Try", opts: []any{advisory.Try()}, try: true},
	{name: "Timeout", opts: []any{advisory.Wait(1500 * time.Millisecond)}},
	{name: "TimeoutRoundsUp", opts: []any{advisory.Wait(time.Nanosecond)}},
	{name: "Shared", opts: []any{advisory.Shared()}},
	{name: "SharedTry", opts: []any{advisory.Shared(), advisory.Try()}, try: true},
	{name: "SharedTimeout", opts: []any{advisory.Wait(time.Minute), advisory.Shared()}},
	{name: "TxOptions", opts: []any{advisory.TxOptions(&sql.TxOptions{Isolation: sql.LevelSerializable, ReadOnly: true})}},
	{name: "Heartbeat", opts: []any{advisory.Heartbeat(time.Hour)}},
	{name: "SharedTryHeartbeat", opts: []any{advisory.Shared(), advisory.Try(), advisory.Heartbeat(time.Hour)}, try: true},
}

// leaseOptions are the option sets Acquire is run with. Each holds a
// heartbeat interval long enough that no heartbeat comes before the
// release; leaseBeat is the interval of the cases that wait for one.
var leaseOptions = []struct {
	name    string
	opts    []advisory.LeaseOption
	try     bool
	shared  bool
	fencing bool
}{
	{name: "Default", opts: []advisory.LeaseOption{advisory.Heartbeat(time.Hour)}},
	{name: "Try", opts: []advisory.LeaseOption{advisory.Try(), advisory.Heartbeat(time.Hour)}, try: true},
	{name: "Timeout", opts: []advisory.LeaseOption{advisory.Wait(1500 * time.Millisecond), advisory.Heartbeat(time.Hour)}},
	{name: "Shared", opts: []advisory.LeaseOption{advisory.Shared(), advisory.Heartbeat(time.Hour)}, shared: true},
	{name: "SharedTry", opts: []advisory.LeaseOption{advisory.Shared(), advisory.Try(), advisory.Heartbeat(time.Hour)}, try: true, shared: true},
	{name: "Fencing", opts: []advisory.LeaseOption{advisory.Fencing(), advisory.Heartbeat(time.Hour)}, fencing: true},
	{name: "SharedTryFencing", opts: []advisory.LeaseOption{advisory.Fencing(), advisory.Shared(), advisory.Try(), advisory.Heartbeat(time.Hour)}, try: true, fencing: true, shared: true},
}

// leaseBeat is the heartbeat interval of the cases that wait for
// heartbeats: short, yet long enough for a loaded machine to answer the
// mock within it.
const leaseBeat = 200 * time.Millisecond

func driftCases() []driftCase {
	var cases []driftCase
	add := func(fn, name string, run func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock)) {
		cases = append(cases, driftCase{fn: fn, name: name, run: run})
	}
	addIf := func(ok bool, fn, name string, run func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock)) {
		if ok {
			add(fn, name, run)
		}
	}

	// Single-key session and transaction locks, for every key.
	for _, key := range driftKeys {
		k := strings.NewReplacer("-", "Minus", ":", "Pair").Replace(key.String())
		for _, c := range []struct {
			fn     string
			expect func(sqlmock.Sqlmock, advisory.Key) *sqlmock.ExpectedExec
			call   func(context.Context, *sql.Conn, advisory.Key) error
		}{
			{"Lock", mock.ExpectLock, advisory.Lock},
			{"LockShared", mock.ExpectLockShared, advisory.LockShared},
		} {
			add(c.fn, k, func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
				c.expect(m, key)
				if err := c.call(context.Background(), conn(t, db), key); err != nil {
					t.Errorf("%s: %v", c.fn, err)
				}
			})
		}
		for _, c := range []struct {
			fn     string
			expect func(sqlmock.Sqlmock, advisory.Key, bool) *sqlmock.ExpectedExec
			call   func(context.Context, *sql.Conn, advisory.Key) (bool, error)
		}{
			{"TryLock", mock.ExpectTryLock, advisory.TryLock},
			{"TryLockShared", mock.ExpectTryLockShared, advisory.TryLockShared},
		} {
			for _, want := range []bool{true, false} {
				add(c.fn, k+name(want, "Acquired", "Busy"), func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
					c.expect(m, key, want)
					got, err := c.call(context.Background(), conn(t, db), key)
					if got != want || err != nil {
						t.Errorf("%s = %v, %v; want %v, nil", c.fn, got, err, want)
					}
				})
			}
		}
		for _, c := range []struct {
			fn     string
			expect func(sqlmock.Sqlmock, advisory.Key, bool) *sqlmock.ExpectedExec
			call   func(context.Context, *sql.Conn, advisory.Key) error
		}{
			{"Unlock", mock.ExpectUnlock, advisory.Unlock},
			{"UnlockShared", mock.ExpectUnlockShared, advisory.UnlockShared},
		} {
			for _, held := range []bool{true, false} {
				add(c.fn, k+name(held, "Held", "NotHeld"), func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
					c.expect(m, key, held)
					err := c.call(context.Background(), conn(t, db), key)
					if held && err != nil || !held && !errors.Is(err, advisory.ErrNotHeld) {
						t.Errorf("%s held=%v: %v", c.fn, held, err)
					}
				})
			}
		}
		for _, c := range []struct {
			fn     string
			expect func(sqlmock.Sqlmock, advisory.Key) *sqlmock.ExpectedExec
			call   func(context.Context, *sql.Tx, advisory.Key) error
		}{
			{"XactLock", mock.ExpectXactLock, advisory.XactLock},
			{"XactLockShared", mock.ExpectXactLockShared, advisory.XactLockShared},
		} {
			add(c.fn, k, func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
				tx := begin(t, db, m)
				c.expect(m, key)
				if err := c.call(context.Background(), tx, key); err != nil {
					t.Errorf("%s: %v", c.fn, err)
				}
				rollback(t, tx, m)
			})
		}
		for _, c := range []struct {
			fn     string
			expect func(sqlmock.Sqlmock, advisory.Key, bool) *sqlmock.ExpectedExec
			call   func(context.Context, *sql.Tx, advisory.Key) (bool, error)
		}{
			{"TryXactLock", mock.ExpectTryXactLock, advisory.TryXactLock},
			{"TryXactLockShared", mock.ExpectTryXactLockShared, advisory.TryXactLockShared},
		} {
			for _, want := range []bool{true, false} {
				add(c.fn, k+name(want, "Acquired", "Busy"), func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
					tx := begin(t, db, m)
					c.expect(m, key, want)
					got, err := c.call(context.Background(), tx, key)
					if got != want || err != nil {
						t.Errorf("%s = %v, %v; want %v, nil", c.fn, got, err, want)
					}
					rollback(t, tx, m)
				})
			}
		}
	}

	// Multi-key locks, with one key and with a messy set.
	for _, set := range [][]advisory.Key{{advisory.PairKey(5, 6)}, driftKeySet} {
		n := "One"
		if len(set) > 1 {
			n = "Several"
		}
		add("LockKeys", n, func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
			mock.ExpectLockKeys(m, set...)
			if err := advisory.LockKeys(context.Background(), conn(t, db), set...); err != nil {
				t.Errorf("LockKeys: %v", err)
			}
		})
		add("UnlockKeys", n, func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
			mock.ExpectUnlockKeys(m, set...)
			if err := advisory.UnlockKeys(context.Background(), conn(t, db), set...); err != nil {
				t.Errorf("UnlockKeys: %v", err)
			}
		})
		add("XactLockKeys", n, func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
			tx := begin(t, db, m)
			mock.ExpectXactLockKeys(m, set...)
			if err := advisory.XactLockKeys(context.Background(), tx, set...); err != nil {
				t.Errorf("XactLockKeys: %v", err)
			}
			rollback(t, tx, m)
		})
	}
	add("UnlockKeys", "SomeNotHeld", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
		mock.ExpectUnlockKeys(m, driftKeySet...).WillReturnResult(sqlmock.NewResult(0, 1))
		if err := advisory.UnlockKeys(context.Background(), conn(t, db), driftKeySet...); !errors.Is(err, advisory.ErrNotHeld) {
			t.Errorf("UnlockKeys = %v, want ErrNotHeld", err)
		}
	})
	add("UnlockAll", "", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
		mock.ExpectUnlockAll(m)
		if err := advisory.UnlockAll(context.Background(), conn(t, db)); err != nil {
			t.Errorf("UnlockAll: %v", err)
		}
	})

	// Scoped helpers, for every option set and outcome.
	key := advisory.NameKey(7, "nightly-report")
	for _, o := range driftOptions {
		// Each helper runs with the option sets its option type takes.
		xo, isX := kind[advisory.XactOption](o.opts)
		so, isS := kind[advisory.SessionOption](o.opts)
		lo, isL := kind[advisory.LockOption](o.opts)
		xact := func(outcome string, run func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock, called *bool) error, check func(t *testing.T, err error, called bool)) {
			addIf(isX, "WithXactLock", o.name+outcome, func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
				called := false
				err := run(t, db, m, &called)
				check(t, err, called)
			})
		}
		xact("Commit", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock, called *bool) error {
			mock.ExpectWithXactLock(m, key, mock.Commit, xo...)
			return advisory.WithXactLock(context.Background(), db, key, func(context.Context, *sql.Tx) error {
				*called = true
				return nil
			}, xo...)
		}, wantCall(nil))
		xact("Rollback", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock, called *bool) error {
			mock.ExpectWithXactLock(m, key, mock.Rollback, xo...)
			return advisory.WithXactLock(context.Background(), db, key, func(context.Context, *sql.Tx) error {
				*called = true
				return errBoom
			}, xo...)
		}, wantCall(errBoom))
		xact("Panic", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock, called *bool) error {
			mock.ExpectWithXactLock(m, key, mock.Rollback, xo...)
			return recovered(func() error {
				return advisory.WithXactLock(context.Background(), db, key, func(context.Context, *sql.Tx) error {
					*called = true
					panic(errBoom)
				}, xo...)
			})
		}, wantCall(errBoom))
		if o.try {
			xact("NotAcquired", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock, called *bool) error {
				mock.ExpectWithXactLock(m, key, mock.XactNotAcquired, xo...)
				return advisory.WithXactLock(context.Background(), db, key, func(context.Context, *sql.Tx) error {
					*called = true
					return nil
				}, xo...)
			}, wantNoCall(advisory.ErrNotAcquired))
		}
		xact("Failed", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock, called *bool) error {
			mock.ExpectWithXactLock(m, key, mock.XactFailed, xo...)
			return advisory.WithXactLock(context.Background(), db, key, func(context.Context, *sql.Tx) error {
				*called = true
				return nil
			}, xo...)
		}, wantNoCall(advisory.ErrLockTimeout))
		xact("Deadlock", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock, called *bool) error {
			mock.ExpectWithXactLock(m, key, mock.XactFailed, xo...).Lock.WillReturnError(mock.ServerError("40P01"))
			return advisory.WithXactLock(context.Background(), db, key, func(context.Context, *sql.Tx) error {
				*called = true
				return nil
			}, xo...)
		}, wantNoCall(advisory.ErrDeadlock))
		xact("GrantedWithBody", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock, called *bool) error {
			mock.ExpectWithXactLock(m, key, mock.XactGranted, xo...)
			m.ExpectExec("UPDATE reports SET built = true").WillReturnResult(sqlmock.NewResult(0, 1))
			m.ExpectCommit()
			return advisory.WithXactLock(context.Background(), db, key, func(ctx context.Context, tx *sql.Tx) error {
				*called = true
				_, err := tx.ExecContext(ctx, "UPDATE reports SET built = true")
				return err
			}, xo...)
		}, wantCall(nil))
		xact("CommitFails", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock, called *bool) error {
			mock.ExpectWithXactLock(m, key, mock.Commit, xo...).Commit.WillReturnError(errBoom)
			return advisory.WithXactLock(context.Background(), db, key, func(context.Context, *sql.Tx) error {
				*called = true
				return nil
			}, xo...)
		}, wantCall(errBoom))

		session := func(outcome string, run func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock, called *bool) error, check func(t *testing.T, err error, called bool)) {
			addIf(isS, "WithSessionLock", o.name+outcome, func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
				called := false
				err := run(t, db, m, &called)
				check(t, err, called)
			})
		}
		session("Release", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock, called *bool) error {
			mock.ExpectWithSessionLock(m, key, mock.Release, so...)
			return advisory.WithSessionLock(context.Background(), db, key, func(context.Context, *sql.Conn) error {
				*called = true
				return nil
			}, so...)
		}, wantCall(nil))
		session("ReleaseAfterError", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock, called *bool) error {
			mock.ExpectWithSessionLock(m, key, mock.Release, so...)
			return advisory.WithSessionLock(context.Background(), db, key, func(context.Context, *sql.Conn) error {
				*called = true
				return errBoom
			}, so...)
		}, wantCall(errBoom))
		if o.try {
			session("NotAcquired", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock, called *bool) error {
				mock.ExpectWithSessionLock(m, key, mock.SessionNotAcquired, so...)
				return advisory.WithSessionLock(context.Background(), db, key, func(context.Context, *sql.Conn) error {
					*called = true
					return nil
				}, so...)
			}, wantNoCall(advisory.ErrNotAcquired))
		}
		session("Failed", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock, called *bool) error {
			mock.ExpectWithSessionLock(m, key, mock.SessionFailed, so...)
			return advisory.WithSessionLock(context.Background(), db, key, func(context.Context, *sql.Conn) error {
				*called = true
				return nil
			}, so...)
		}, wantNoCall(advisory.ErrLockTimeout))
		session("Deadlock", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock, called *bool) error {
			mock.ExpectWithSessionLock(m, key, mock.SessionFailed, so...).Lock.WillReturnError(mock.ServerError("40P01"))
			return advisory.WithSessionLock(context.Background(), db, key, func(context.Context, *sql.Conn) error {
				*called = true
				return nil
			}, so...)
		}, wantNoCall(advisory.ErrDeadlock))
		session("Panic", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock, called *bool) error {
			mock.ExpectWithSessionLock(m, key, mock.SessionGranted, so...).ExpectRelease()
			return recovered(func() error {
				return advisory.WithSessionLock(context.Background(), db, key, func(context.Context, *sql.Conn) error {
					*called = true
					panic(errBoom)
				}, so...)
			})
		}, wantCall(errBoom))
		session("GrantedWithBody", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock, called *bool) error {
			s := mock.ExpectWithSessionLock(m, key, mock.SessionGranted, so...)
			m.ExpectExec("VACUUM reports").WillReturnResult(sqlmock.NewResult(0, 0))
			s.ExpectRelease()
			return advisory.WithSessionLock(context.Background(), db, key, func(ctx context.Context, conn *sql.Conn) error {
				*called = true
				_, err := conn.ExecContext(ctx, "VACUUM reports")
				return err
			}, so...)
		}, wantCall(nil))
		session("LockLost", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock, called *bool) error {
			mock.ExpectWithSessionLock(m, key, mock.Release, so...).Unlock.WillReturnResult(sqlmock.NewResult(0, 0))
			return advisory.WithSessionLock(context.Background(), db, key, func(context.Context, *sql.Conn) error {
				*called = true
				return nil
			}, so...)
		}, wantCall(advisory.ErrLockLost))

		// The caller-owned forms send the same statements: the caller's
		// BEGIN or connection, then the lock, fn and the end of the scope.
		addIf(isL, "WithXactLockTx", o.name+"Commit", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
			mock.ExpectWithXactLock(m, key, mock.Commit, xo...)
			tx, err := db.BeginTx(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			called := false
			err = advisory.WithXactLockTx(context.Background(), tx, key, func(context.Context, *sql.Tx) error {
				called = true
				return nil
			}, lo...)
			wantCall(nil)(t, err, called)
		})
		addIf(isS, "WithSessionLockConn", o.name+"Release", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
			mock.ExpectWithSessionLockConn(m, key, mock.Release, so...)
			conn, err := db.Conn(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			called := false
			err = advisory.WithSessionLockConn(context.Background(), conn, key, func(context.Context, *sql.Conn) error {
				called = true
				return nil
			}, so...)
			wantCall(nil)(t, err, called)
		})
	}

	// The Locker, for every option set and outcome, on one connection.
	for _, o := range leaseOptions {
		// A Locker's heartbeat is its own: the options of its leases are
		// the rest, which Locker.Acquire takes.
		var opts []advisory.LockerOption
		for _, opt := range o.opts {
			if lo, ok := opt.(advisory.LockerOption); ok {
				opts = append(opts, lo)
			}
		}
		locker := func(t *testing.T, db *sql.DB, hb time.Duration) *advisory.Locker {
			t.Helper()
			lk, err := advisory.NewLocker(db, advisory.LockerConfig{MaxConns: 1, Heartbeat: hb})
			if err != nil {
				t.Fatal(err)
			}
			return lk
		}
		closed := func(t *testing.T, lk *advisory.Locker) {
			t.Helper()
			if err := lk.Close(context.Background()); err != nil {
				t.Errorf("Close: %v", err)
			}
		}
		add("NewLocker", o.name+"Release", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
			c := mock.ExpectLockerConn(m)
			c.ExpectAcquire(key, mock.LeaseGranted, opts...)
			c.ExpectRelease(key, opts...)
			c.ExpectClose()
			lk := locker(t, db, time.Hour)
			l, err := lk.Acquire(context.Background(), key, opts...)
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int64{true: mock.LeaseToken}[o.fencing]; l.Token() != want {
				t.Errorf("Token = %d, want %d", l.Token(), want)
			}
			if err := l.Release(context.Background()); err != nil {
				t.Errorf("Release: %v", err)
			}
			closed(t, lk)
		})
		if o.try {
			add("NewLocker", o.name+"NotAcquired", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
				c := mock.ExpectLockerConn(m)
				c.ExpectAcquire(key, mock.LeaseNotAcquired, opts...)
				c.ExpectClose()
				lk := locker(t, db, time.Hour)
				if _, err := lk.Acquire(context.Background(), key, opts...); !errors.Is(err, advisory.ErrNotAcquired) {
					t.Errorf("Acquire = %v, want ErrNotAcquired", err)
				}
				closed(t, lk)
			})
		}
		add("NewLocker", o.name+"LockTableFull", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
			c := mock.ExpectLockerConn(m)
			try := c.ExpectAcquire(key, mock.LeaseFailed, opts...)
			if try.Exec != nil {
				try.Exec.WillReturnError(mock.ServerError("53200"))
			} else {
				try.Query.WillReturnError(mock.ServerError("53200"))
			}
			c.ExpectClose()
			lk := locker(t, db, time.Hour)
			if _, err := lk.Acquire(context.Background(), key, opts...); !errors.Is(err, advisory.ErrLockTableFull) {
				t.Errorf("Acquire = %v, want ErrLockTableFull", err)
			}
			closed(t, lk)
		})
		add("NewLocker", o.name+"Pooler", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
			c := mock.ExpectLockerConn(m)
			c.ExpectAcquire(key, mock.LeasePooler, opts...)
			lk := locker(t, db, time.Hour)
			if _, err := lk.Acquire(context.Background(), key, opts...); !errors.Is(err, advisory.ErrSharedSession) {
				t.Errorf("Acquire = %v, want ErrSharedSession", err)
			}
			closed(t, lk)
		})
		add("NewLocker", o.name+"LostAtHeartbeat", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
			c := mock.ExpectLockerConn(m)
			c.ExpectAcquire(key, mock.LeaseGranted, opts...)
			c.ExpectHeartbeat(0)
			lk := locker(t, db, leaseBeat)
			l, err := lk.Acquire(context.Background(), key, opts...)
			if err != nil {
				t.Fatal(err)
			}
			<-l.Done()
			if err := l.Release(context.Background()); !errors.Is(err, advisory.ErrLockLost) {
				t.Errorf("Release after a heartbeat found nothing = %v, want ErrLockLost", err)
			}
			closed(t, lk)
		})
	}

	// Leases, for every option set and outcome.
	for _, o := range leaseOptions {
		acquire := func(outcome string, run func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock)) {
			add("Acquire", o.name+outcome, run)
		}
		acquire("Release", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
			s := mock.ExpectAcquire(m, key, mock.LeaseGranted, o.opts...)
			s.ExpectRelease()
			want := int64(0) // the start answers NULL
			if o.fencing {
				want = mock.LeaseToken
			}
			if s.Token != want {
				t.Errorf("LeaseScope.Token = %d, want %d", s.Token, want)
			}
			l := acquired(t, db, key, s.Token, o.opts)
			if err := l.Release(context.Background()); err != nil {
				t.Errorf("Release: %v", err)
			}
			<-l.Done()
			if err := l.Err(); !errors.Is(err, context.Canceled) {
				t.Errorf("Err after Release = %v, want context.Canceled", err)
			}
		})
		acquire("LostAtRelease", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
			s := mock.ExpectAcquire(m, key, mock.LeaseGranted, o.opts...)
			s.ExpectRelease().WillReturnResult(sqlmock.NewResult(0, 0))
			l := acquired(t, db, key, s.Token, o.opts)
			if err := l.Release(context.Background()); !errors.Is(err, advisory.ErrLockLost) {
				t.Errorf("Release = %v, want ErrLockLost", err)
			}
		})
		if o.fencing {
			acquire("Token", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
				s := mock.ExpectAcquire(m, key, mock.LeaseGranted, o.opts...).WithToken(77)
				s.ExpectRelease()
				l := acquired(t, db, key, 77, o.opts)
				if err := l.Release(context.Background()); err != nil {
					t.Errorf("Release: %v", err)
				}
			})
		}
		if o.try {
			acquire("NotAcquired", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
				mock.ExpectAcquire(m, key, mock.LeaseNotAcquired, o.opts...)
				notAcquired(t, db, key, o.opts, advisory.ErrNotAcquired)
			})
		}
		acquire("Failed", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
			mock.ExpectAcquire(m, key, mock.LeaseFailed, o.opts...)
			notAcquired(t, db, key, o.opts, advisory.ErrLockTimeout)
		})
		acquire("Deadlock", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
			mock.ExpectAcquire(m, key, mock.LeaseFailed, o.opts...).Lock.WillReturnError(mock.ServerError("40P01"))
			notAcquired(t, db, key, o.opts, advisory.ErrDeadlock)
		})
		acquire("Standby", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
			mock.ExpectAcquire(m, key, mock.LeaseStandby, o.opts...)
			notAcquired(t, db, key, o.opts, advisory.ErrStandby)
		})
		acquire("Pooler", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
			mock.ExpectAcquire(m, key, mock.LeasePooler, o.opts...)
			notAcquired(t, db, key, o.opts, advisory.ErrSharedSession)
		})
		if o.try {
			continue // Watch takes no Try or Timeout; the lock is taken already
		}
		for _, tc := range []struct {
			name    string
			outcome mock.LeaseOutcome
			want    error
		}{
			{"Release", mock.LeaseGranted, nil},
			{"Standby", mock.LeaseStandby, advisory.ErrStandby},
			{"Pooler", mock.LeasePooler, advisory.ErrSharedSession},
		} {
			add("Watch", o.name+tc.name, func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
				cfg := advisory.WatchConfig{Shared: o.shared, Heartbeat: time.Hour, Fencing: o.fencing}
				s := mock.ExpectWatch(m, key, tc.outcome, cfg)
				if tc.want == nil {
					s.ExpectRelease()
				}
				conn, err := db.Conn(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				l, err := advisory.Watch(context.Background(), conn, key, cfg)
				if tc.want != nil {
					if !errors.Is(err, tc.want) {
						t.Fatalf("Watch = %v, want %v", err, tc.want)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if l.Token() != s.Token {
					t.Errorf("Token = %d, want %d", l.Token(), s.Token)
				}
				if err := l.Release(context.Background()); err != nil {
					t.Errorf("Release: %v", err)
				}
			})
		}
	}
	// Heartbeats, which the cases above never wait for: one held, then one
	// that finds the lock gone, which ends the lease.
	for _, o := range []struct {
		name string
		opts []advisory.SessionOption
	}{
		{"Default", []advisory.SessionOption{advisory.Heartbeat(leaseBeat)}},
		{"Shared", []advisory.SessionOption{advisory.Shared(), advisory.Heartbeat(leaseBeat)}},
	} {
		add("Acquire", o.name+"HeartbeatLost", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
			s := mock.ExpectAcquire(m, key, mock.LeaseGranted, as[advisory.LeaseOption](o.opts)...)
			s.ExpectHeartbeat(true)
			s.ExpectHeartbeat(false)
			l := acquired(t, db, key, 0, o.opts)
			select {
			case <-l.Done():
			case <-time.After(time.Minute):
				t.Fatal("the lease outlived a heartbeat that found the lock gone")
			}
			if err := l.Err(); !errors.Is(err, advisory.ErrLockLost) {
				t.Errorf("Err = %v, want ErrLockLost", err)
			}
			if err := l.Release(context.Background()); !errors.Is(err, advisory.ErrLockLost) {
				t.Errorf("Release = %v, want ErrLockLost", err)
			}
		})
		add("WithSessionLock", o.name+"HeartbeatLost", func(t *testing.T, db *sql.DB, m sqlmock.Sqlmock) {
			s := mock.ExpectWithSessionLock(m, key, mock.SessionGranted, o.opts...)
			s.ExpectHeartbeat(false)
			called := false
			err := advisory.WithSessionLock(context.Background(), db, key, func(ctx context.Context, _ *sql.Conn) error {
				called = true
				select {
				case <-ctx.Done():
				case <-time.After(time.Minute):
					t.Error("fn's context outlived a heartbeat that found the lock gone")
				}
				return nil
			}, o.opts...)
			wantCall(advisory.ErrLockLost)(t, err, called)
		})
	}
	cases = append(cases, lockAnyDriftCases()...)
	return cases
}

// kind returns opts as options of kind T, and whether each of them is one.
func kind[T any](opts []any) ([]T, bool) {
	out := make([]T, 0, len(opts))
	for _, o := range opts {
		t, ok := o.(T)
		if !ok {
			return nil, false
		}
		out = append(out, t)
	}
	return out, true
}

// as returns opts as options of kind T, which each of them is.
func as[T, S any](opts []S) []T {
	out := make([]T, len(opts))
	for i, o := range opts {
		out[i] = any(o).(T)
	}
	return out
}

// acquired calls Acquire, which must succeed with token, and releases the
// lease when the test ends if the test has not.
func acquired[O advisory.LeaseOption](t *testing.T, db *sql.DB, key advisory.Key, token int64, opts []O) *advisory.Lease {
	t.Helper()
	l, err := advisory.Acquire(context.Background(), db, key, as[advisory.LeaseOption](opts)...)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	t.Cleanup(func() { _ = l.Release(context.Background()) })
	if l.Key() != key || l.Token() != token || l.Err() != nil {
		t.Errorf("lease: Key %v, Token %d, Err %v; want %v, %d, nil", l.Key(), l.Token(), l.Err(), key, token)
	}
	return l
}

// notAcquired calls Acquire, which must fail with an error matching want.
func notAcquired(t *testing.T, db *sql.DB, key advisory.Key, opts []advisory.LeaseOption, want error) {
	t.Helper()
	l, err := advisory.Acquire(context.Background(), db, key, opts...)
	if l != nil || !errors.Is(err, want) {
		t.Errorf("Acquire = %v, %v; want nil, %v", l, err, want)
	}
}

// matchers are the ways a test can set up its mock; every drift case runs
// under each.
var matchers = []struct {
	name string
	new  func(t *testing.T) (*sql.DB, sqlmock.Sqlmock)
}{
	{"Regexp", func(t *testing.T) (*sql.DB, sqlmock.Sqlmock) { return mock.New(t) }},
	{"Equal", func(t *testing.T) (*sql.DB, sqlmock.Sqlmock) {
		return mock.New(t, mock.QueryMatcher(sqlmock.QueryMatcherEqual))
	}},
	{"PlainSqlmock", func(t *testing.T) (*sql.DB, sqlmock.Sqlmock) { return plain(t, false) }},
	{"NewDBEqual", func(t *testing.T) (*sql.DB, sqlmock.Sqlmock) {
		db, m, err := mock.NewDB(mock.QueryMatcher(sqlmock.QueryMatcherEqual))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db, m
	}},
}

// TestDrift runs every advisory function, and every scoped helper with
// each option set, against a mock that expects only what the matching
// helper laid down. A change to what advisory sends fails here, before it
// fails in the tests of this package's users.
func TestDrift(t *testing.T) {
	t.Parallel()
	cases := driftCases()
	for _, mt := range matchers {
		t.Run(mt.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range cases {
				t.Run(c.fn+"/"+c.name, func(t *testing.T) {
					t.Parallel()
					db, m := mt.new(t)
					c.run(t, db, m)
					if err := m.ExpectationsWereMet(); err != nil {
						t.Errorf("expectations not met: %v", err)
					}
				})
			}
		})
	}
}

// notLocking lists advisory's exported functions that take a *sql.Conn,
// *sql.Tx or *sql.DB but take no lock, and so have no helper, each with the
// reason.
var notLocking = map[string]string{
	"NewTxContext": "puts a transaction in a context; it sends nothing",
}

// TestDriftCoversEveryLockFunction fails when advisory exports a function
// that takes a *sql.Conn, *sql.Tx or *sql.DB and has no drift case, or
// when a case names a function advisory no longer has.
func TestDriftCoversEveryLockFunction(t *testing.T) {
	t.Parallel()
	all := lockFunctions(t, filepath.Join("..", "advisory"))
	want := slices.DeleteFunc(slices.Clone(all), func(fn string) bool { _, skip := notLocking[fn]; return skip })
	if len(want) == 0 {
		t.Fatal("found no lock functions in ../advisory")
	}
	for fn := range notLocking {
		if !slices.Contains(all, fn) {
			t.Errorf("notLocking lists advisory.%s, which is not an exported function taking *sql.Conn, *sql.Tx or *sql.DB", fn)
		}
	}
	var got []string
	for _, c := range driftCases() {
		got = append(got, c.fn)
	}
	slices.Sort(got)
	got = slices.Compact(got)
	for _, fn := range want {
		if !slices.Contains(got, fn) {
			t.Errorf("advisory.%s has no drift case, and probably no helper in package mock", fn)
		}
	}
	for _, fn := range got {
		if !slices.Contains(want, fn) {
			t.Errorf("drift cases call advisory.%s, which is not an exported function taking *sql.Conn, *sql.Tx or *sql.DB", fn)
		}
	}
}

// lockFunctions lists the exported functions of the package in dir that
// take a *sql.Conn, *sql.Tx or *sql.DB.
func lockFunctions(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var out []string
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || !fd.Name.IsExported() {
				continue
			}
			for _, p := range fd.Type.Params.List {
				if isSQLHandle(p.Type) {
					out = append(out, fd.Name.Name)
					break
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// isSQLHandle reports whether e is *sql.Conn, *sql.Tx or *sql.DB.
func isSQLHandle(e ast.Expr) bool {
	star, ok := e.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "sql" && (sel.Sel.Name == "Conn" || sel.Sel.Name == "Tx" || sel.Sel.Name == "DB")
}

// wantCall checks that fn ran and the call returned an error matching
// want, or nil for a nil want.
func wantCall(want error) func(t *testing.T, err error, called bool) {
	return func(t *testing.T, err error, called bool) {
		t.Helper()
		if !called {
			t.Error("fn was not called")
		}
		if want == nil && err != nil || want != nil && !errors.Is(err, want) {
			t.Errorf("err = %v, want %v", err, want)
		}
	}
}

// wantNoCall checks that fn did not run and the call returned an error
// matching want.
func wantNoCall(want error) func(t *testing.T, err error, called bool) {
	return func(t *testing.T, err error, called bool) {
		t.Helper()
		if called {
			t.Error("fn was called")
		}
		if !errors.Is(err, want) {
			t.Errorf("err = %v, want %v", err, want)
		}
	}
}

// recovered runs f and returns its error, or the error it panicked with.
func recovered(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(error)
			if !ok {
				panic(r)
			}
			err = e
		}
	}()
	return f()
}

// name picks a subtest name for a boolean.
func name(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}
