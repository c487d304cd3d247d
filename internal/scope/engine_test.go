package scope

import (
	"context"
	"database/sql"
	"errors"
	"regexp"
	"runtime"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	str := func(s string) sql.NullString { return sql.NullString{String: s, Valid: true} }
	const (
		pg17 = "PostgreSQL 17.2 (Debian 17.2-1.pgdg120+1) on x86_64-pc-linux-gnu, compiled by gcc (Debian 12.2.0-14) 12.2.0, 64-bit"
		yb11 = "PostgreSQL 11.2-YB-2024.2.4.0-b0 on x86_64-pc-linux-gnu, compiled by clang version 17.0.6, 64-bit"
		yb15 = "PostgreSQL 15.12-YB-2025.1.0.0-b0 on x86_64-pc-linux-gnu, compiled by clang version 17.0.6, 64-bit"
	)
	tests := []struct {
		name          string
		p             probed
		engine        string
		version       string
		session, xact bool // refused
	}{
		{"PostgreSQL", probed{version: pg17}, PostgreSQL, "17.2", false, false},
		{"PostgreSQLNamedApp", probed{version: pg17, application: "billing"}, PostgreSQL, "17.2", false, false},
		{"PostgreSQLEmptyNeonSetting", probed{version: pg17, neon: str("")}, PostgreSQL, "17.2", false, false},
		{"Neon", probed{version: pg17, neon: str("8f4c3d8a")}, Neon, "17.2", false, false},
		{"Supavisor", probed{version: pg17, application: "Supavisor"}, Supavisor, "", true, false},
		{"CitusCoordinator", probed{version: pg17, citus: str("12.1-1")}, Citus, "12.1-1", false, false},
		{"CitusWorker", probed{version: pg17, citus: str("12.1-1"), citusGroup: 3}, Citus, "12.1-1", true, true},
		{"CockroachDB22", probed{version: "CockroachDB CCL v22.2.19 (x86_64-pc-linux-gnu, built 2024/02/12 22:05:51, go1.19.13)"}, CockroachDB, "v22.2.19", true, true},
		{"CockroachDB26.2", probed{version: "CockroachDB CCL v26.2.4 (aarch64-unknown-linux-gnu, built 2026/08/01 10:00:00, go1.23.7)"}, CockroachDB, "v26.2.4", true, true},
		{"CockroachDB26.3", probed{version: "CockroachDB OSS v26.3.0 (x86_64-pc-linux-gnu, built 2026/08/20 10:00:00, go1.23.7)"}, CockroachDB, "v26.3.0", true, false},
		{"CockroachDB30", probed{version: "CockroachDB CCL v30.1.2 (x86_64-pc-linux-gnu)"}, CockroachDB, "v30.1.2", true, false},
		{"CockroachDBUnparsed", probed{version: "CockroachDB CCL (a build of its own)"}, CockroachDB, "", true, true},
		{"YugabyteDB2024", probed{version: yb11}, YugabyteDB, "2024.2.4.0", true, true},
		{"YugabyteDB2024Silenced", probed{version: yb11, ybSilence: str("on")}, YugabyteDB, "2024.2.4.0", true, true},
		{"YugabyteDB2025", probed{version: yb15, ybLocks: str("on"), ybSilence: str("off")}, YugabyteDB, "2025.1.0.0", false, false},
		{"YugabyteDB2025Off", probed{version: yb15, ybLocks: str("off"), ybSilence: str("off")}, YugabyteDB, "2025.1.0.0", true, true},
		{"YugabyteDB2025Silenced", probed{version: yb15, ybLocks: str("off"), ybSilence: str("on")}, YugabyteDB, "2025.1.0.0", true, true},
		{"Unknown", probed{version: "SomeSQL 1.0"}, PostgreSQL, "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := classify(tt.p)
			if e.Name != tt.engine || e.Version != tt.version || (e.Session != "") != tt.session || (e.Xact != "") != tt.xact {
				t.Errorf("classify = %+v; want %s %q, session refused %v, xact refused %v",
					e, tt.engine, tt.version, tt.session, tt.xact)
			}
		})
	}
}

// probeRows answers the probe as version would.
func probeRows(version string) *sqlmock.Rows {
	return sqlmock.NewRows([]string{"version", "application_name", "yb", "yb_silence", "neon", "citus"}).
		AddRow(version, "", nil, nil, nil, nil)
}

// probedMock returns a sqlmock database that is probed, and a connection
// of it; sqlmock fails any statement that was not expected.
func probedMock(t *testing.T) (*sql.DB, *sql.Conn, sqlmock.Sqlmock) {
	t.Helper()
	db, m, err := sqlmock.New(sqlmock.QueryMatcherOption(sqlmock.QueryMatcherEqual))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.ExpectationsWereMet(); err != nil {
			t.Error(err)
		}
		_ = db.Close()
	})
	ProbeOnMock(db)
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return db, conn, m
}

// TestEngineProbedOnce proves that the first check on a *sql.DB sends the
// probe and no later one sends anything, on the same conn, a transaction
// and the *sql.DB itself: sqlmock fails any statement beyond the probe.
func TestEngineProbedOnce(t *testing.T) {
	t.Parallel()
	db, conn, m := probedMock(t)
	ctx := context.Background()
	m.ExpectQuery(sqltext.EngineProbe).WithoutArgs().WillReturnRows(probeRows("CockroachDB CCL v26.3.1 (x86_64-pc-linux-gnu)"))
	for range 3 {
		if err := CheckSession(ctx, conn, "try lock", "42"); !errors.Is(err, ErrUnsupportedEngine) {
			t.Fatalf("CheckSession = %v; want ErrUnsupportedEngine", err)
		}
	}
	m.ExpectBegin()
	m.ExpectRollback()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckXact(ctx, tx, "try xact lock", "42"); err != nil {
		t.Errorf("CheckXact on CockroachDB 26.3 = %v; want nil", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := CheckDB(ctx, db, false, "lease", "42"); !errors.Is(err, ErrUnsupportedEngine) {
		t.Errorf("CheckDB = %v; want ErrUnsupportedEngine", err)
	}
	e, err := EngineOf(ctx, db, db)
	if err != nil || e.Name != CockroachDB || e.Version != "v26.3.1" {
		t.Errorf("EngineOf = %+v, %v", e, err)
	}
}

// TestEngineProbeRefused identifies an engine that refuses the probe with
// an error of its own by version() alone, on a connection.
func TestEngineProbeRefused(t *testing.T) {
	t.Parallel()
	_, conn, m := probedMock(t)
	ctx := context.Background()
	m.ExpectQuery(sqltext.EngineProbe).WillReturnError(&stateError{"42883"})
	m.ExpectQuery(sqltext.EngineVersion).WillReturnRows(sqlmock.NewRows([]string{"version"}).
		AddRow("CockroachDB CCL v19.2.0 (x86_64-unknown-linux-gnu)"))
	var ee *EngineError
	if err := CheckSession(ctx, conn, "lock", "42"); !errors.As(err, &ee) || ee.Engine != CockroachDB {
		t.Fatalf("CheckSession = %v; want CockroachDB refused", err)
	}
}

// TestEngineKnownPerConnection identifies each driver connection on its
// own: a second database's connection is probed at its first check, the
// first's is not probed again, and a transaction on a connection already
// identified, and its *sql.DB's CheckDB, send nothing.
func TestEngineKnownPerConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db1, conn1, m1 := probedMock(t)
	db2, conn2, m2 := probedMock(t)
	m1.ExpectQuery(sqltext.EngineProbe).WillReturnRows(probeRows("PostgreSQL 17.2 on x86_64-pc-linux-gnu"))
	m2.ExpectQuery(sqltext.EngineProbe).WillReturnRows(probeRows("CockroachDB CCL v24.1.0 (x86_64-pc-linux-gnu)"))
	for range 2 {
		if err := CheckSession(ctx, conn1, "lock", "1"); err != nil {
			t.Fatalf("CheckSession on PostgreSQL = %v", err)
		}
		if err := CheckSession(ctx, conn2, "lock", "1"); !errors.Is(err, ErrUnsupportedEngine) {
			t.Fatalf("CheckSession on CockroachDB = %v; want ErrUnsupportedEngine", err)
		}
	}
	m1.ExpectBegin()
	m1.ExpectRollback()
	tx, err := db1.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckXact(ctx, tx, "xact lock", "1"); err != nil {
		t.Errorf("CheckXact on PostgreSQL = %v", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := CheckDB(ctx, db1, true, "lease", "1"); err != nil {
		t.Errorf("CheckDB on PostgreSQL = %v", err)
	}
	if err := CheckDB(ctx, db2, true, "lease", "1"); !errors.Is(err, ErrUnsupportedEngine) {
		t.Errorf("CheckDB on CockroachDB 24.1 = %v; want ErrUnsupportedEngine", err)
	}
	// A transaction that has ended has no connection to check: its lock
	// statement fails on its own.
	if err := CheckXact(ctx, tx, "xact lock", "1"); err != nil {
		t.Errorf("CheckXact after the rollback = %v; want nil", err)
	}
}

// TestEngineForgotten proves that the engines kept per driver connection
// and per *sql.DB do not keep them alive: once a database and its
// connection are closed and collected, their entries go.
func TestEngineForgotten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var kdb weak.Pointer[sql.DB]
	var kconn weak.Pointer[byte]
	func() {
		db, m, err := sqlmock.New()
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		ProbeOnMock(db)
		m.ExpectQuery(regexp.QuoteMeta(sqltext.EngineProbe)).WillReturnRows(probeRows("PostgreSQL 17.2 on x86_64-pc-linux-gnu"))
		if err := CheckDB(ctx, db, false, "lock", "1"); err != nil {
			t.Fatal(err)
		}
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		dc, ok := identify(conn)
		if !ok || dc.p == nil {
			t.Fatal("no driver connection under a sqlmock conn")
		}
		kconn = weak.Make(dc.p)
		kdb = weak.Make(db)
	}()
	kept := func() bool {
		_, c := connEngines.m.Load(kconn)
		_, d := dbEngines.m.Load(kdb)
		return c || d
	}
	if !kept() {
		t.Fatal("no entry for the database or its connection after a check")
	}
	pgtest.Await(t, "the entries for a closed database and its connection to go", func() (bool, error) {
		runtime.GC()
		return !kept(), nil
	})
}

// stateError is a server's error with a SQLSTATE.
type stateError struct{ code string }

func (e *stateError) Error() string    { return "server error " + e.code }
func (e *stateError) SQLState() string { return e.code }

// TestEngineNotProbedOnMock takes a sqlmock database that was not marked
// for the probe for PostgreSQL, without a statement.
func TestEngineNotProbedOnMock(t *testing.T) {
	t.Parallel()
	db, m, err := sqlmock.New()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := CheckDB(context.Background(), db, false, "lock", "1"); err != nil {
		t.Fatal(err)
	}
	if err := m.ExpectationsWereMet(); err != nil {
		t.Fatal(err)
	}
}

// TestEngineConcurrent checks one *sql.DB from many goroutines at once,
// for the race detector: one probe answers them all, and the waiters
// that raced it read what it stored.
func TestEngineConcurrent(t *testing.T) {
	t.Parallel()
	db, _, m := probedMock(t)
	m.MatchExpectationsInOrder(false)
	m.ExpectQuery(sqltext.EngineProbe).WillReturnRows(probeRows("PostgreSQL 15.8 on x86_64-pc-linux-gnu"))
	ctx := context.Background()
	if err := CheckDB(ctx, db, false, "lock", "1"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 100 {
				if err := CheckDB(ctx, db, true, "lock", "1"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkCheckSession measures what a lock call pays to know its
// engine once the *sql.DB's probe has answered: no round trip, a few
// reads.
func BenchmarkCheckSession(b *testing.B) {
	db, m, err := sqlmock.New()
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ProbeOnMock(db)
	m.ExpectQuery(regexp.QuoteMeta(sqltext.EngineProbe)).WillReturnRows(probeRows("PostgreSQL 17.2 on x86_64-pc-linux-gnu"))
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	if err := CheckSession(ctx, conn, "lock", "1"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := CheckSession(ctx, conn, "lock", "1"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDriverConnOf keys a driver connection by the object it points to,
// and nothing else.
func TestDriverConnOf(t *testing.T) {
	t.Parallel()
	type zero struct{}
	c := &stateError{"0"}
	tests := []struct {
		name string
		dc   any
		keyd bool
	}{
		{"Pointer", c, true},
		{"Nil", nil, false},
		{"NilPointer", (*stateError)(nil), false},
		{"NotAPointer", stateError{"0"}, false},
		{"ZeroSize", &zero{}, false},
	}
	for _, tt := range tests {
		if got := driverConnOf(tt.dc); (got.p != nil) != tt.keyd || isMockType(got.t) {
			t.Errorf("%s: driverConnOf = %+v; want keyed %v, not a mock", tt.name, got, tt.keyd)
		}
	}
	if a, b := driverConnOf(c), driverConnOf(c); a != b {
		t.Error("two calls on one connection give two keys")
	}
}

// TestEngineProbeOutlivesDeadlines checks that a probe slower than each
// caller's deadline finds the engine all the same, in one probe: the
// callers whose deadline ends first fail, and a later one finds the
// engine known. Were each probe cut short by its caller, none would ever
// finish.
func TestEngineProbeOutlivesDeadlines(t *testing.T) {
	t.Parallel()
	db, m, err := sqlmock.New(sqlmock.QueryMatcherOption(sqlmock.QueryMatcherEqual))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ProbeOnMock(db)
	m.ExpectQuery(sqltext.EngineProbe).WithoutArgs().WillDelayFor(200 * time.Millisecond).
		WillReturnRows(probeRows("CockroachDB CCL v26.3.1 (x86_64-pc-linux-gnu)"))
	var failed int
	for deadline := time.Now().Add(10 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatalf("the engine was still unknown after 10 s (%d calls failed)", failed)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		err := CheckDB(ctx, db, false, "lease", "42")
		cancel()
		if errors.Is(err, ErrUnsupportedEngine) {
			break
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("CheckDB = %v; want a deadline exceeded while the probe runs", err)
		}
		failed++
	}
	if failed == 0 {
		t.Error("the first call found the engine; want it to fail while the probe runs")
	}
	if err := m.ExpectationsWereMet(); err != nil {
		t.Error(err)
	}
}
