package inspect_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/inspect"
	"github.com/pgadvisory/pgadvisory/advisory/keyspace"
	"github.com/pgadvisory/pgadvisory/mock"
)

// exactSQL makes a database of mock.New match statements to the expected
// SQL exactly; mock.New checks at cleanup that every expectation was met.
var exactSQL = mock.QueryMatcher(sqlmock.QueryMatcherEqual)

func TestDecodeKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name             string
		classid, objid   uint32
		objsubid         int16
		want             advisory.Key
		wantErr          bool
		wantStringForLog string
	}{
		{name: "Int64Zero", objsubid: 1, want: advisory.Int64Key(0), wantStringForLog: "0"},
		{name: "Int64Small", objid: 42, objsubid: 1, want: advisory.Int64Key(42), wantStringForLog: "42"},
		{name: "Int64HighHalf", classid: 1, objid: 2, objsubid: 1, want: advisory.Int64Key(1<<32 | 2), wantStringForLog: "4294967298"},
		{name: "Int64LowHalfTopBit", objid: 0x80000000, objsubid: 1, want: advisory.Int64Key(1 << 31), wantStringForLog: "2147483648"},
		{name: "Int64MaxUint32Low", objid: math.MaxUint32, objsubid: 1, want: advisory.Int64Key(math.MaxUint32), wantStringForLog: "4294967295"},
		{name: "Int64Max", classid: 0x7fffffff, objid: math.MaxUint32, objsubid: 1, want: advisory.Int64Key(math.MaxInt64), wantStringForLog: "9223372036854775807"},
		{name: "Int64MinusOne", classid: math.MaxUint32, objid: math.MaxUint32, objsubid: 1, want: advisory.Int64Key(-1), wantStringForLog: "-1"},
		{name: "Int64Min", classid: 0x80000000, objsubid: 1, want: advisory.Int64Key(math.MinInt64), wantStringForLog: "-9223372036854775808"},
		{name: "Int64NegativeLowZero", classid: math.MaxUint32, objsubid: 1, want: advisory.Int64Key(-1 << 32), wantStringForLog: "-4294967296"},
		{name: "Int64Negative", classid: 0xfffffffe, objid: 0xfffffffe, objsubid: 1, want: advisory.Int64Key(-(1 << 32) - 2), wantStringForLog: "-4294967298"},
		{name: "PairZero", objsubid: 2, want: advisory.PairKey(0, 0), wantStringForLog: "0:0"},
		{name: "PairPositive", classid: 1, objid: 2, objsubid: 2, want: advisory.PairKey(1, 2), wantStringForLog: "1:2"},
		{name: "PairNegativeFirst", classid: math.MaxUint32, objid: 2, objsubid: 2, want: advisory.PairKey(-1, 2), wantStringForLog: "-1:2"},
		{name: "PairNegativeSecond", classid: 100, objid: 0xfffffffe, objsubid: 2, want: advisory.PairKey(100, -2), wantStringForLog: "100:-2"},
		{name: "PairBothMin", classid: 0x80000000, objid: 0x80000000, objsubid: 2, want: advisory.PairKey(math.MinInt32, math.MinInt32),
			wantStringForLog: "-2147483648:-2147483648"},
		{name: "PairBothMax", classid: 0x7fffffff, objid: 0x7fffffff, objsubid: 2, want: advisory.PairKey(math.MaxInt32, math.MaxInt32),
			wantStringForLog: "2147483647:2147483647"},
		{name: "PairNameKey", classid: 100, objid: uint32(advisory.HashText("sync_inventory")), objsubid: 2,
			want: advisory.NameKey(100, "sync_inventory")},
		{name: "SubidZero", objsubid: 0, wantErr: true},
		{name: "SubidThree", objsubid: 3, wantErr: true},
		{name: "SubidNegative", objsubid: -1, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := inspect.DecodeKey(tt.classid, tt.objid, tt.objsubid)
			if tt.wantErr {
				if !errors.Is(err, advisory.ErrBadKey) {
					t.Errorf("DecodeKey(%d, %d, %d) = %v, %v; want ErrBadKey", tt.classid, tt.objid, tt.objsubid, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("DecodeKey(%d, %d, %d) = %v, %v; want %v", tt.classid, tt.objid, tt.objsubid, got, err, tt.want)
			}
			if tt.wantStringForLog != "" && got.String() != tt.wantStringForLog {
				t.Errorf("key String = %q, want %q", got, tt.wantStringForLog)
			}
			// The encoding the server uses, applied to the decoded key,
			// gives back the columns.
			var classid, objid uint32
			if v, ok := got.Int64(); ok {
				classid, objid = uint32(uint64(v)>>32), uint32(v)
			} else {
				k1, k2, _ := got.Pair()
				classid, objid = uint32(k1), uint32(k2)
			}
			if classid != tt.classid || objid != tt.objid || got.IsPair() != (tt.objsubid == 2) {
				t.Errorf("round trip gave classid %d objid %d pair %v", classid, objid, got.IsPair())
			}
		})
	}
}

// The statement Locks sends, and its columns.
const (
	inspectQuery = `SELECT l.classid::pg_catalog.int8, l.objid::pg_catalog.int8, l.objsubid::pg_catalog.int4, l.mode, l.granted, ` +
		`l.pid, d.datname::pg_catalog.text, a.application_name, a.usename::pg_catalog.text, pg_catalog.host(a.client_addr), a.state, ` +
		`NULLIF(a.query, '<insufficient privilege>'), a.xact_start, a.state_change, w.waitstart, ` +
		`extract(epoch FROM pg_catalog.clock_timestamp() - w.waitstart)::pg_catalog.float8, ` +
		`CASE WHEN NOT l.granted THEN pg_catalog.pg_blocking_pids(l.pid)::pg_catalog.text END ` +
		`FROM pg_catalog.pg_locks l ` +
		`CROSS JOIN LATERAL (SELECT (pg_catalog.to_jsonb(l) ->> 'waitstart')::pg_catalog.timestamptz AS waitstart) w ` +
		`LEFT JOIN pg_catalog.pg_database d ON d.oid = l.database ` +
		`LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid ` +
		`WHERE l.locktype = 'advisory'`
	inspectThisDB = ` AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())`
)

var inspectColumns = []string{"classid", "objid", "objsubid", "mode", "granted", "pid", "datname",
	"application_name", "usename", "client_addr", "state", "query", "xact_start", "state_change",
	"waitstart", "waited", "blocking"}

func TestLocks(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	var reg keyspace.Registry
	reg.MustRegister(advisory.Namespace{ID: 100, Name: "inventory"})

	db, m := mock.New(t, exactSQL)
	m.ExpectQuery(inspectQuery + inspectThisDB).WillReturnRows(sqlmock.NewRows(inspectColumns).
		// A waiter on a pair key in a registered namespace.
		AddRow(int64(100), int64(uint32(advisory.HashText("sync_inventory"))), int64(2), "ExclusiveLock", false,
			int64(4243), "app", "worker", "alice", "10.0.0.7", "active",
			"SELECT pg_advisory_lock(100, hashtext('sync_inventory'))", t0, t0.Add(time.Second), t0.Add(2*time.Second),
			1.5, "{4250,4242}").
		// Its holder, idle in transaction.
		AddRow(int64(100), int64(uint32(advisory.HashText("sync_inventory"))), int64(2), "ExclusiveLock", true,
			int64(4242), "app", "api", "alice", nil, "idle in transaction",
			"SELECT 1", t0, t0, nil, nil, nil).
		// A negative bigint key held shared by another role's session, seen
		// without pg_monitor: most columns are NULL.
		AddRow(int64(math.MaxUint32), int64(math.MaxUint32-41), int64(1), "ShareLock", true,
			int64(4250), "app", "", "bob", nil, nil,
			nil, nil, nil, nil, nil, nil).
		// A prepared transaction: no pid, no activity.
		AddRow(int64(0), int64(7), int64(1), "ExclusiveLock", true,
			nil, "app", nil, nil, nil, nil, nil, nil, nil, nil, nil, nil))

	got, err := inspect.Locks(context.Background(), db, inspect.WithRegistry(&reg))
	if err != nil {
		t.Fatal(err)
	}
	want := []inspect.Lock{
		{Key: advisory.Int64Key(-42), Shared: true, Granted: true, PID: 4250, Database: "app", User: "bob"},
		{Key: advisory.Int64Key(7), Granted: true, Database: "app"},
		{Key: advisory.NameKey(100, "sync_inventory"), Namespace: "inventory", Granted: true, PID: 4242, Database: "app",
			ApplicationName: "api", User: "alice", State: "idle in transaction", Query: "SELECT 1",
			XactStart: t0, StateChange: t0},
		{Key: advisory.NameKey(100, "sync_inventory"), Namespace: "inventory", PID: 4243, Database: "app",
			ApplicationName: "worker", User: "alice", ClientAddr: "10.0.0.7", State: "active",
			Query: "SELECT pg_advisory_lock(100, hashtext('sync_inventory'))", XactStart: t0,
			StateChange: t0.Add(time.Second), WaitStart: t0.Add(2 * time.Second), Waited: 1500 * time.Millisecond,
			BlockedBy: []int{4242, 4250}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Locks =\n%+v\nwant\n%+v", got, want)
	}
	if s := got[3].String(); s != "pid 4243 (worker) waits 1.5s for exclusive 100:370782098 [inventory], blocked by 4242, 4250" {
		t.Errorf("String = %q", s)
	}
}

func TestLocksAllDatabases(t *testing.T) {
	t.Parallel()
	db, m := mock.New(t, exactSQL)
	m.ExpectQuery(inspectQuery).WillReturnRows(sqlmock.NewRows(inspectColumns))
	got, err := inspect.Locks(context.Background(), db, inspect.AllDatabases())
	if err != nil || len(got) != 0 {
		t.Errorf("Locks = %v, %v; want no locks", got, err)
	}
}

func TestLocksErrors(t *testing.T) {
	t.Parallel()
	errDriver := errors.New("connection reset")
	row := func(classid, objid, objsubid int64, mode string, blocking driver.Value) []driver.Value {
		return []driver.Value{classid, objid, objsubid, mode, blocking == nil, int64(1), "db",
			nil, nil, nil, nil, nil, nil, nil, nil, nil, blocking}
	}
	tests := []struct {
		name    string
		row     []driver.Value
		err     error
		wantErr error
		wantMsg string
	}{
		{name: "QueryFails", err: errDriver, wantErr: errDriver, wantMsg: "inspect: connection reset"},
		{name: "BadSubid", row: row(1, 2, 3, "ExclusiveLock", nil), wantErr: advisory.ErrBadKey, wantMsg: "objsubid 3"},
		{name: "ClassidRange", row: row(1<<32, 2, 1, "ExclusiveLock", nil), wantErr: advisory.ErrBadKey, wantMsg: "out of range"},
		{name: "BadMode", row: row(1, 2, 1, "AccessShareLock", nil), wantMsg: `unexpected advisory lock mode "AccessShareLock"`},
		{name: "BadArray", row: row(1, 2, 1, "ShareLock", "{1,x}"), wantMsg: `malformed int array "{1,x}"`},
		{name: "NotArray", row: row(1, 2, 1, "ShareLock", "1,2"), wantMsg: `malformed int array "1,2"`},
		{name: "NoOpeningBrace", row: row(1, 2, 1, "ShareLock", "4242}"), wantMsg: `malformed int array "4242}"`},
		{name: "NoClosingBrace", row: row(1, 2, 1, "ShareLock", "{4242"), wantMsg: `malformed int array "{4242"`},
		{name: "LoneOpeningBrace", row: row(1, 2, 1, "ShareLock", "{"), wantMsg: `malformed int array "{"`},
		{name: "LoneClosingBrace", row: row(1, 2, 1, "ShareLock", "}"), wantMsg: `malformed int array "}"`},
		{name: "EmptyElement", row: row(1, 2, 1, "ShareLock", "{1,,2}"), wantMsg: `malformed int array "{1,,2}"`},
		{name: "TrailingComma", row: row(1, 2, 1, "ShareLock", "{1,}"), wantMsg: `malformed int array "{1,}"`},
		{name: "Nested", row: row(1, 2, 1, "ShareLock", "{{1}}"), wantMsg: `malformed int array "{{1}}"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, m := mock.New(t, exactSQL)
			q := m.ExpectQuery(inspectQuery + inspectThisDB)
			if tt.err != nil {
				q.WillReturnError(tt.err)
			} else {
				q.WillReturnRows(sqlmock.NewRows(inspectColumns).AddRow(tt.row...))
			}
			got, err := inspect.Locks(context.Background(), db)
			if err == nil {
				t.Fatalf("Locks = %v, nil; want an error", got)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Locks = %v, want errors.Is %v", err, tt.wantErr)
			}
			if !strings.HasPrefix(err.Error(), "inspect: ") || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Locks = %q, want it to contain %q", err, tt.wantMsg)
			}
		})
	}
	if _, err := inspect.Locks(context.Background(), nil); err == nil {
		t.Error("Locks(nil) = nil error")
	}
}

func TestLocksBlockedByForms(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		text  driver.Value
		want  []int
		grant bool
	}{
		{name: "Null", text: nil},
		{name: "Empty", text: "{}"},
		{name: "One", text: "{17}", want: []int{17}},
		{name: "UnsortedDuplicates", text: "{9,3,9}", want: []int{3, 9}},
		{name: "GrantedIgnored", text: "{5}", grant: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, m := mock.New(t, exactSQL)
			m.ExpectQuery(inspectQuery + inspectThisDB).WillReturnRows(sqlmock.NewRows(inspectColumns).
				AddRow(int64(0), int64(1), int64(1), "ExclusiveLock", tt.grant, int64(1), "db",
					nil, nil, nil, nil, nil, nil, nil, nil, nil, tt.text))
			got, err := inspect.Locks(context.Background(), db)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got[0].BlockedBy, tt.want) {
				t.Errorf("BlockedBy = %#v, want %#v", got[0].BlockedBy, tt.want)
			}
		})
	}
}

func TestLockString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		l    inspect.Lock
		want string
	}{
		{name: "Holder", l: inspect.Lock{Key: advisory.PairKey(7, 1), Namespace: "billing", Granted: true, PID: 4242, ApplicationName: "billing-api"},
			want: "pid 4242 (billing-api) holds exclusive 7:1 [billing]"},
		{name: "SharedNoApp", l: inspect.Lock{Key: advisory.Int64Key(-42), Shared: true, Granted: true, PID: 5},
			want: "pid 5 holds shared -42"},
		{name: "WaiterUnknownDuration", l: inspect.Lock{Key: advisory.Int64Key(42), PID: 6, BlockedBy: []int{5}},
			want: "pid 6 waits for exclusive 42, blocked by 5"},
		{name: "WaiterMillis", l: inspect.Lock{Key: advisory.Int64Key(42), PID: 6, Waited: 1234567 * time.Microsecond},
			want: "pid 6 waits 1.2s for exclusive 42"},
		{name: "WaiterSubMillis", l: inspect.Lock{Key: advisory.Int64Key(42), PID: 6, Waited: 2345678 * time.Nanosecond},
			want: "pid 6 waits 2ms for exclusive 42"},
		{name: "Prepared", l: inspect.Lock{Key: advisory.Int64Key(1), Granted: true},
			want: "prepared transaction holds exclusive 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.l.String(); got != tt.want {
				t.Errorf("String = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestLocksCanceled checks that Locks under an ended ctx reports ctx's
// error.
func TestLocksCanceled(t *testing.T) {
	t.Parallel()
	db, _ := mock.New(t, exactSQL)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := inspect.Locks(ctx, db)
	if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "inspect: ") {
		t.Errorf("Locks with a cancelled ctx = %v; want context.Canceled", err)
	}
}
