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

func TestSessionSQL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		call     func(context.Context, *sql.Conn) (bool, error)
		sql      string
		affected int64
		want     bool
		wantErr  error
	}{
		// A wait for one key starts with a try, which is the whole of the
		// wait for a free key.
		{"Lock", acquired(func(ctx context.Context, c *sql.Conn) error { return advisory.Lock(ctx, c, k42) }),
			trySQL("pg_catalog.pg_try_advisory_lock(42)"), 1, true, nil},
		{"LockPair", acquired(func(ctx context.Context, c *sql.Conn) error { return advisory.Lock(ctx, c, kPair) }),
			trySQL("pg_catalog.pg_try_advisory_lock(1,-2)"), 1, true, nil},
		{"LockMinInt64", acquired(func(ctx context.Context, c *sql.Conn) error { return advisory.Lock(ctx, c, kMin) }),
			trySQL("pg_catalog.pg_try_advisory_lock(-9223372036854775808)"), 1, true, nil},
		{"LockShared", acquired(func(ctx context.Context, c *sql.Conn) error { return advisory.LockShared(ctx, c, k42) }),
			trySQL("pg_catalog.pg_try_advisory_lock_shared(42)"), 1, true, nil},
		{"TryLockTaken", func(ctx context.Context, c *sql.Conn) (bool, error) { return advisory.TryLock(ctx, c, k42) },
			"SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE pg_catalog.pg_try_advisory_lock(42) END", 1, true, nil},
		{"TryLockBusy", func(ctx context.Context, c *sql.Conn) (bool, error) { return advisory.TryLock(ctx, c, k42) },
			"SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE pg_catalog.pg_try_advisory_lock(42) END", 0, false, nil},
		{"TryLockShared", func(ctx context.Context, c *sql.Conn) (bool, error) { return advisory.TryLockShared(ctx, c, kPair) },
			"SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE pg_catalog.pg_try_advisory_lock_shared(1,-2) END", 1, true, nil},
		// Several keys are not tried: the wait starts with a slice.
		{"LockKeysSortedAndDeduplicated", acquired(func(ctx context.Context, c *sql.Conn) error {
			return advisory.LockKeys(ctx, c, kPair, k42, advisory.Int64Key(-7), k42)
		}), guardedTimeoutSQL(counted("SELECT pg_catalog.pg_advisory_xact_lock(k) FROM (VALUES (-7),(42)) AS k(k) UNION ALL SELECT pg_catalog.pg_advisory_xact_lock(a,b) FROM (VALUES (1,-2)) AS p(a,b)")+", "+
			counted("SELECT pg_catalog.pg_advisory_lock(k) FROM (VALUES (-7),(42)) AS k(k) UNION ALL SELECT pg_catalog.pg_advisory_lock(a,b) FROM (VALUES (1,-2)) AS p(a,b)"), 1100), 1, true, nil},
		{"Unlock", acquired(func(ctx context.Context, c *sql.Conn) error { return advisory.Unlock(ctx, c, k42) }),
			"SELECT 1 WHERE pg_catalog.pg_advisory_unlock(42)", 1, true, nil},
		{"UnlockShared", acquired(func(ctx context.Context, c *sql.Conn) error { return advisory.UnlockShared(ctx, c, kPair) }),
			"SELECT 1 WHERE pg_catalog.pg_advisory_unlock_shared(1,-2)", 1, true, nil},
		{"UnlockKeys", acquired(func(ctx context.Context, c *sql.Conn) error { return advisory.UnlockKeys(ctx, c, kPair, k42) }),
			"SELECT 1 FROM (VALUES (42)) AS k(k) WHERE pg_catalog.pg_advisory_unlock(k) UNION ALL SELECT 1 FROM (VALUES (1,-2)) AS p(a,b) WHERE pg_catalog.pg_advisory_unlock(a,b)", 2, true, nil},
		{"UnlockAll", acquired(func(ctx context.Context, c *sql.Conn) error { return advisory.UnlockAll(ctx, c) }),
			"SELECT pg_catalog.pg_advisory_unlock_all(), pg_catalog.set_config('pgadvisory.lease', '', false)", 1, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			conn, m := mockConn(t)
			m.ExpectExec(tt.sql).WithoutArgs().WillReturnResult(rows(tt.affected))
			got, err := tt.call(context.Background(), conn)
			if err != nil || got != tt.want {
				t.Fatalf("got %v, %v; want %v, nil", got, err, tt.want)
			}
			// The session is still ours: nothing was in doubt.
			if err := conn.PingContext(context.Background()); err != nil {
				t.Fatalf("conn unusable after a clean call: %v", err)
			}
		})
	}
}

// acquired adapts a function that reports only an error.
func acquired(f func(context.Context, *sql.Conn) error) func(context.Context, *sql.Conn) (bool, error) {
	return func(ctx context.Context, c *sql.Conn) (bool, error) {
		if err := f(ctx, c); err != nil {
			return false, err
		}
		return true, nil
	}
}

// TestSessionDiscardsOnDoubt checks that every outcome that leaves the
// session's holding in doubt closes the session instead of returning it to
// the pool. A slice of a wait that runs out (55P03) holds nothing and is no
// such outcome: see TestLockWaitRunsOutKeepsTheSession; for a wait cancelled
// during a slice, see TestLockWaitCancelledDuringSliceDiscards.
func TestSessionDiscardsOnDoubt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		call    func(context.Context, *sql.Conn) error
		try     string // a try that finds the key busy; the wait then reads the settings
		sql     string
		result  sql.Result
		err     error
		cancel  bool
		wantErr []error
		wantMsg string
	}{
		{
			// A statement_timeout can cancel a slice after it took the
			// session lock, before it returned.
			name:    "StatementTimeoutRacesTheGrant",
			call:    func(ctx context.Context, c *sql.Conn) error { return advisory.Lock(ctx, c, k42) },
			try:     trySQL("pg_catalog.pg_try_advisory_lock(42)"),
			sql:     sessionSliceSQL(false, "42", 1100),
			err:     &sqlState{"57014", "canceling statement due to statement timeout"},
			wantErr: []error{advisory.ErrLockTimeout},
			wantMsg: "advisory: lock 42: lock wait timed out: driver: canceling statement due to statement timeout (SQLSTATE 57014)",
		},
		{
			name:    "Deadlock",
			call:    func(ctx context.Context, c *sql.Conn) error { return advisory.LockShared(ctx, c, k42) },
			try:     trySQL("pg_catalog.pg_try_advisory_lock_shared(42)"),
			sql:     sessionSliceSQL(true, "42", 1100),
			err:     &sqlState{"40P01", "deadlock detected"},
			wantErr: []error{advisory.ErrDeadlock},
		},
		{
			name: "LockTableFullAfterPartialGrant",
			call: func(ctx context.Context, c *sql.Conn) error {
				return advisory.LockKeys(ctx, c, advisory.Int64Key(2), advisory.Int64Key(1))
			},
			sql:     sqlForKeys(advisory.Int64Key(1), advisory.Int64Key(2)),
			err:     &sqlState{"53200", "out of shared memory"},
			wantErr: []error{advisory.ErrLockTableFull},
			wantMsg: "advisory: lock [1 2]: lock table full; raise max_locks_per_transaction: driver: out of shared memory (SQLSTATE 53200)",
		},
		{
			name:    "SuccessAfterContextEnded",
			call:    func(ctx context.Context, c *sql.Conn) error { return advisory.Lock(ctx, c, k42) },
			sql:     trySQL("pg_catalog.pg_try_advisory_lock(42)"),
			result:  rows(1),
			cancel:  true,
			wantErr: []error{context.Canceled},
		},
		{
			name: "TryAfterContextEnded",
			call: func(ctx context.Context, c *sql.Conn) error {
				_, err := advisory.TryLock(ctx, c, k42)
				return err
			},
			sql:     "SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE pg_catalog.pg_try_advisory_lock(42) END",
			result:  rows(0),
			cancel:  true,
			wantErr: []error{context.Canceled},
		},
		{
			name:    "UnlockNotHeld",
			call:    func(ctx context.Context, c *sql.Conn) error { return advisory.Unlock(ctx, c, k42) },
			sql:     "SELECT 1 WHERE pg_catalog.pg_advisory_unlock(42)",
			result:  rows(0),
			wantErr: []error{advisory.ErrNotHeld},
			wantMsg: "advisory: unlock 42: lock not held",
		},
		{
			name: "UnlockKeysPartlyHeld",
			call: func(ctx context.Context, c *sql.Conn) error {
				return advisory.UnlockKeys(ctx, c, advisory.Int64Key(1), advisory.Int64Key(2))
			},
			sql:     "SELECT 1 FROM (VALUES (1),(2)) AS k(k) WHERE pg_catalog.pg_advisory_unlock(k)",
			result:  rows(1),
			wantErr: []error{advisory.ErrNotHeld},
		},
		{
			name:    "UnlockFails",
			call:    func(ctx context.Context, c *sql.Conn) error { return advisory.UnlockShared(ctx, c, k42) },
			sql:     "SELECT 1 WHERE pg_catalog.pg_advisory_unlock_shared(42)",
			err:     &sqlState{"57P01", "terminating connection due to administrator command"},
			wantErr: []error{},
		},
		{
			// A cancel may have landed after the unlock ran, and a
			// second unlock could release a stacked lock twice: the
			// release is not sent again, and the session is closed.
			name:    "UnlockCancelled",
			call:    func(ctx context.Context, c *sql.Conn) error { return advisory.UnlockShared(ctx, c, k42) },
			sql:     "SELECT 1 WHERE pg_catalog.pg_advisory_unlock_shared(42)",
			err:     &sqlState{"57014", "canceling statement due to user request"},
			wantErr: []error{},
		},
		{
			name:    "UnlockAllFails",
			call:    func(ctx context.Context, c *sql.Conn) error { return advisory.UnlockAll(ctx, c) },
			sql:     "SELECT pg_catalog.pg_advisory_unlock_all(), pg_catalog.set_config('pgadvisory.lease', '', false)",
			err:     errors.New("connection reset"),
			wantErr: []error{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			conn, m := mockConn(t)
			ctx := context.Background()
			if tt.cancel {
				ctx = endedAsCallReturns{ctx}
			}
			if tt.try != "" {
				m.ExpectExec(tt.try).WithoutArgs().WillReturnResult(rows(0))
				m.ExpectQuery(waitSettingsSQL).WillReturnRows(waitSettingsRows("0", "0", "1s"))
			}
			e := m.ExpectExec(tt.sql).WithoutArgs()
			if tt.err != nil {
				e.WillReturnError(tt.err)
			} else {
				e.WillReturnResult(tt.result)
			}
			m.ExpectClose() // the session is discarded, not pooled
			err := tt.call(ctx, conn)
			if err == nil {
				t.Fatal("want an error")
			}
			for _, want := range tt.wantErr {
				if !errors.Is(err, want) {
					t.Errorf("error %q does not match %v", err, want)
				}
			}
			if tt.err != nil && !errors.Is(err, tt.err) {
				t.Errorf("error %q hides the driver's error", err)
			}
			if tt.wantMsg != "" && err.Error() != tt.wantMsg {
				t.Errorf("message\n got %q\nwant %q", err, tt.wantMsg)
			}
			if !strings.HasPrefix(err.Error(), "advisory: ") {
				t.Errorf("message %q lacks the package prefix", err)
			}
			if err := conn.PingContext(context.Background()); !errors.Is(err, sql.ErrConnDone) {
				t.Fatalf("after a doubtful outcome the conn is still usable (ping: %v)", err)
			}
		})
	}
}

func TestUnlockRunsAfterCancel(t *testing.T) {
	t.Parallel()
	conn, m := mockConn(t)
	m.ExpectExec("SELECT 1 WHERE pg_catalog.pg_advisory_unlock(42)").WithoutArgs().WillReturnResult(rows(1))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := advisory.Unlock(ctx, conn, k42); err != nil {
		t.Fatalf("Unlock with a cancelled context: %v", err)
	}
}

func TestSessionBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, _ := mockConn(t)
	calls := map[string]func() error{
		"LockNilConn":       func() error { return advisory.Lock(ctx, nil, k42) },
		"LockSharedNilConn": func() error { return advisory.LockShared(ctx, nil, k42) },
		"TryLockNilConn":    func() error { _, err := advisory.TryLock(ctx, nil, k42); return err },
		"TryLockSharedNil":  func() error { _, err := advisory.TryLockShared(ctx, nil, k42); return err },
		"UnlockNilConn":     func() error { return advisory.Unlock(ctx, nil, k42) },
		"UnlockSharedNil":   func() error { return advisory.UnlockShared(ctx, nil, k42) },
		"UnlockAllNilConn":  func() error { return advisory.UnlockAll(ctx, nil) },
		"LockKeysNilConn":   func() error { return advisory.LockKeys(ctx, nil, k42) },
		"UnlockKeysNilConn": func() error { return advisory.UnlockKeys(ctx, nil, k42) },
		"LockKeysNone":      func() error { return advisory.LockKeys(ctx, conn) },
		"UnlockKeysNone":    func() error { return advisory.UnlockKeys(ctx, conn) },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := call()
			if err == nil || !strings.HasPrefix(err.Error(), "advisory: ") {
				t.Fatalf("got %v, want a clear advisory error", err)
			}
		})
	}
}

func TestLongKeyListsStayShortInErrors(t *testing.T) {
	t.Parallel()
	conn, m := mockConn(t)
	keys := make([]advisory.Key, 100)
	for i := range keys {
		keys[i] = advisory.Int64Key(int64(i))
	}
	m.ExpectExec(sqlForKeys(keys...)).WillReturnError(&sqlState{"53200", "out of shared memory"})
	m.ExpectClose()
	err := advisory.LockKeys(context.Background(), conn, keys...)
	want := "advisory: lock [0 1 2 3 4 5 6 7 and 92 more]: lock table full"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("got %v, want a message starting %q", err, want)
	}
}

// sqlForKeys is the statement LockKeys sends first for sorted bigint keys:
// the first slice of its wait, which takes them as transaction locks, then
// as session locks.
func sqlForKeys(keys ...advisory.Key) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = "(" + k.String() + ")"
	}
	values := " FROM (VALUES " + strings.Join(parts, ",") + ") AS k(k)"
	return guardedTimeoutSQL(counted("SELECT pg_catalog.pg_advisory_xact_lock(k)"+values)+", "+
		counted("SELECT pg_catalog.pg_advisory_lock(k)"+values), 1100)
}

// counted is the select-list entry of a slice that takes several keys with
// lock, a statement: the count of its rows.
func counted(lock string) string {
	return "(SELECT pg_catalog.count(*) FROM (" + lock + ") AS l)"
}

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
			m.ExpectExec(sessionSlice(tt.shared, 1100, tt.keys...)).WithoutArgs().WillReturnError(errRanOut)
			if len(tt.keys) == 1 {
				// A slice for one key that ran out may hold it.
				expectNotHeldHere(m, tt.shared, tt.keys[0])
			}
			if tt.try == "" {
				m.ExpectQuery(sqltext.WaitSettings).WillReturnRows(defaultSettings())
			}
			m.ExpectExec(sessionSlice(tt.shared, 1100, tt.keys...)).WithoutArgs().WillReturnResult(rows(1))
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

// TestLockWaitRunsOutKeepsTheSession: a wait without Wait ends when the
// session's lock_timeout or statement_timeout, counted from its start,
// runs out. Its slices hold nothing when they run out, so the session is
// not discarded. The mock's delays stand for the server's waits.
func TestLockWaitRunsOutKeepsTheSession(t *testing.T) {
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
				e := m.ExpectExec(sqltext.DirectSliceStmt(sqltext.Inline, sqltext.Guarded, false, int64(ms), key).Query).WithoutArgs()
				if i == 0 {
					e.WillDelayFor(tt.firstWait)
				}
				e.WillReturnError(errRanOut)
				expectNotHeldHere(m, false, key)
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

// TestLockSliceThatRanOut: a slice for one key waits for the session lock
// itself, and a lock_timeout that fires as the lock is granted fails the
// statement with the lock held; so the check that follows a slice that ran
// out decides. Held: the wait took the key, and returns nil. Not held: the
// wait goes on. The check failed: the session is in doubt, and discarded.
// In a transaction block, a slice takes the key as a transaction lock
// first and puts the bound back, and holds nothing when it runs out.
func TestLockSliceThatRanOut(t *testing.T) {
	t.Parallel()
	key := sqltext.KeyOf(k42)
	try := sqltext.TryLock(sqltext.Guarded, false, false, key)
	slice := sessionSlice(false, 1100, key)
	held := sqltext.HeldHere(sqltext.Inline, false, key).Query
	errCheck := errors.New("driver: the check failed")
	inBlock := func() *sqlmock.Rows {
		return sqlmock.NewRows([]string{"lock_timeout", "statement_timeout", "deadlock_timeout", "in_block"}).AddRow("0", "0", "1s", true)
	}
	tests := []struct {
		name      string
		expect    func(m sqlmock.Sqlmock)
		wantErr   error // nil for the lock
		discarded bool
	}{
		{"GrantedAsItRanOut", func(m sqlmock.Sqlmock) {
			m.ExpectQuery(sqltext.WaitSettings).WillReturnRows(defaultSettings())
			m.ExpectExec(slice).WithoutArgs().WillReturnError(errRanOut)
			m.ExpectExec(held).WithoutArgs().WillReturnResult(rows(1))
		}, nil, false},
		{"NotGranted", func(m sqlmock.Sqlmock) {
			m.ExpectQuery(sqltext.WaitSettings).WillReturnRows(defaultSettings())
			m.ExpectExec(slice).WithoutArgs().WillReturnError(errRanOut)
			m.ExpectExec(held).WithoutArgs().WillReturnResult(rows(0))
			m.ExpectExec(slice).WithoutArgs().WillReturnResult(rows(1))
		}, nil, false},
		{"CheckFails", func(m sqlmock.Sqlmock) {
			m.ExpectQuery(sqltext.WaitSettings).WillReturnRows(defaultSettings())
			m.ExpectExec(slice).WithoutArgs().WillReturnError(errRanOut)
			m.ExpectExec(held).WithoutArgs().WillReturnError(errCheck)
			m.ExpectClose()
		}, errCheck, true},
		{"InATransactionBlock", func(m sqlmock.Sqlmock) {
			m.ExpectQuery(sqltext.WaitSettings).WillReturnRows(inBlock())
			blockSlice := sqltext.SessionSliceStmt(sqltext.Inline, sqltext.Guarded, false, 1100, 0, key).Query
			m.ExpectExec(blockSlice).WithoutArgs().WillReturnError(errRanOut)
			m.ExpectExec(blockSlice).WithoutArgs().WillReturnResult(rows(1))
		}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			conn, m := mockConn(t)
			m.ExpectExec(try).WithoutArgs().WillReturnResult(rows(0))
			tt.expect(m)
			err := advisory.Lock(context.Background(), conn, k42)
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("got %v; want the lock", err)
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Fatalf("got %v; want %v", err, tt.wantErr)
			}
			ping := conn.PingContext(context.Background())
			if tt.discarded != errors.Is(ping, sql.ErrConnDone) {
				t.Errorf("discarded = %v (ping: %v); want %v", !tt.discarded, ping, tt.discarded)
			}
		})
	}
}

// TestLockWaitCancelledDuringSliceDiscards: a statement of a wait that ctx
// ends may have been granted as it ended, so the session is discarded: the
// try, which is the whole of a wait for a free key, or a slice after the
// settings.
func TestLockWaitCancelledDuringSliceDiscards(t *testing.T) {
	t.Parallel()
	key := sqltext.KeyOf(k42)
	try := sqltext.TryLock(sqltext.Guarded, false, false, key)
	tests := []struct {
		name  string
		slice string // the statement that ctx ends
	}{
		{"Try", try},
		{"AfterTheSettings", sessionSlice(false, 1100, key)},
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
			m.ExpectExec(sessionSlice(false, 1100, key)).WithoutArgs().WillReturnError(r.err)
			checkRefused(t, advisory.Lock(context.Background(), conn, k42), r.wantErr, r.err)
			checkKept(t, conn)
		})
		t.Run("LockKeys"+r.name, func(t *testing.T) {
			t.Parallel()
			conn, m := mockConn(t)
			m.ExpectExec(sessionSlice(false, 1100, keys...)).WithoutArgs().WillReturnError(r.err)
			err := advisory.LockKeys(context.Background(), conn, advisory.Int64Key(2), advisory.Int64Key(1))
			checkRefused(t, err, r.wantErr, r.err)
			checkKept(t, conn)
		})
	}
}

// TestTryLockRefused: a try that the server refuses (the check raised the
// refusal's SQLSTATE before the lock function ran) returns ErrStandby or
// ErrSharedSession, for a try and for the try that starts a wait, in a
// session as in a transaction, and nothing more is sent.
func TestTryLockRefused(t *testing.T) {
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
