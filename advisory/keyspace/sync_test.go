package keyspace_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"
	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/keyspace"
	"github.com/pgadvisory/pgadvisory/internal/sqltext"
	"github.com/pgadvisory/pgadvisory/mock"
)

// The statements Sync sends for the default table.
const (
	syncLock   = "SELECT 1 WHERE CASE WHEN pg_catalog.pg_is_in_recovery() THEN pg_catalog.set_config('lock_timeout', '-1', true) IS NULL WHEN pg_catalog.length(pg_catalog.current_setting('pgadvisory.lease', true)) > 0 THEN pg_catalog.set_config('pgadvisory_shared_session', '', true) IS NULL ELSE pg_catalog.pg_try_advisory_xact_lock(-2147483648,1) END"
	syncCreate = `CREATE TABLE IF NOT EXISTS "pgadvisory"."namespaces" (id integer PRIMARY KEY, ` +
		`name pg_catalog.text NOT NULL UNIQUE CHECK (name <> ''), owner pg_catalog.text NOT NULL DEFAULT '', ` +
		`doc pg_catalog.text NOT NULL DEFAULT '', registered_by pg_catalog.text NOT NULL DEFAULT '', ` +
		`updated_at pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now())`
	syncProbe  = `SELECT pg_catalog.to_regclass($1) IS NOT NULL, pg_catalog.current_setting('application_name')`
	syncSelect = `SELECT id, name, owner, doc, registered_by FROM "pgadvisory"."namespaces"`
	syncInsert = `INSERT INTO "pgadvisory"."namespaces" (id, name, owner, doc, registered_by) VALUES ($1, $2, $3, $4, $5)`
	syncUpdate = `UPDATE "pgadvisory"."namespaces" SET owner = $3, doc = $4, updated_at = pg_catalog.now() ` +
		`WHERE id = $1 AND name = $2 AND registered_by = $5`
)

// syncExpectCreate expects Sync to make ready for creating the default
// table: it looks for an earlier release's table, answering that none
// exists, and for schema pgadvisory, answering that it exists.
func syncExpectCreate(m sqlmock.Sqlmock) {
	m.ExpectQuery(sqltext.TablesNamed).WithArgs("pgadvisory_namespaces").WillReturnRows(sqlmock.NewRows([]string{"nspname"}))
	m.ExpectQuery(sqltext.SchemaExists).WillReturnRows(sqlmock.NewRows([]string{"exists"}).AddRow(true))
}

// syncLibraryRow is the row Sync keeps for the library's own namespace.
var syncLibraryRow = []driver.Value{int64(-2147483648), "pgadvisory", "github.com/pgadvisory/pgadvisory",
	"keys the pgadvisory library takes for itself; 1 serialises Registry.Sync", "pgadvisory"}

// syncExpectProbe expects Sync to look for table, and answers whether it
// exists and the session's application_name.
func syncExpectProbe(m sqlmock.Sqlmock, table string, exists bool, app string) {
	m.ExpectQuery(syncProbe).WithArgs(table).
		WillReturnRows(sqlmock.NewRows([]string{"exists", "application_name"}).AddRow(exists, app))
}

func syncDictRows(rows ...[]driver.Value) *sqlmock.Rows {
	r := sqlmock.NewRows([]string{"id", "name", "owner", "doc", "registered_by"})
	for _, row := range rows {
		r.AddRow(row...)
	}
	return r
}

func TestSync(t *testing.T) {
	t.Parallel()
	var r keyspace.Registry
	r.MustRegister(nsBilling)                                                      // 7, up to date
	r.MustRegister(nsPayments)                                                     // 8, new
	r.MustRegister(advisory.Namespace{ID: 9, Name: "reports", Owner: "new-owner"}) // ours, changed
	r.MustRegister(advisory.Namespace{ID: 10, Name: "shared", Owner: "new-owner"}) // another service's

	db, m := mock.New(t, exactSQL)
	m.ExpectBegin()
	m.ExpectExec(syncLock).WillReturnResult(rows(1))
	syncExpectProbe(m, `"pgadvisory"."namespaces"`, true, "svc-a")
	m.ExpectQuery(syncSelect).WillReturnRows(syncDictRows(
		syncLibraryRow,
		[]driver.Value{int64(7), "billing", "team-payments", "invoice runs", "svc-a"},
		[]driver.Value{int64(9), "reports", "old-owner", "", "svc-a"},
		[]driver.Value{int64(10), "shared", "theirs", "", "svc-b"},
		[]driver.Value{int64(11), "unrelated", "", "", "svc-c"},
	))
	m.ExpectExec(syncInsert).WithArgs(int64(8), "payments", "team-payments", "", "svc-a").WillReturnResult(rows(1))
	m.ExpectExec(syncUpdate).WithArgs(int64(9), "reports", "new-owner", "", "svc-a").WillReturnResult(rows(1))
	m.ExpectCommit()

	if err := r.Sync(context.Background(), db); err != nil {
		t.Fatal(err)
	}
}

func TestSyncCreatesTable(t *testing.T) {
	t.Parallel()
	var r keyspace.Registry
	r.MustRegister(nsBilling)
	db, m := mock.New(t, exactSQL)
	m.ExpectBegin()
	m.ExpectExec(syncLock).WillReturnResult(rows(1))
	syncExpectProbe(m, `"ops"."lock_keys"`, false, "")
	m.ExpectExec(`CREATE TABLE IF NOT EXISTS "ops"."lock_keys" (` + strings.SplitN(syncCreate, "(", 2)[1]).
		WillReturnResult(rows(0))
	m.ExpectQuery(`SELECT id, name, owner, doc, registered_by FROM "ops"."lock_keys"`).WillReturnRows(syncDictRows())
	m.ExpectExec(strings.Replace(syncInsert, `"pgadvisory"."namespaces"`, `"ops"."lock_keys"`, 1)).
		WithArgs(syncLibraryRow...).WillReturnResult(rows(1))
	m.ExpectExec(strings.Replace(syncInsert, `"pgadvisory"."namespaces"`, `"ops"."lock_keys"`, 1)).
		WithArgs(int64(7), "billing", "team-payments", "invoice runs", "billing-api").WillReturnResult(rows(1))
	m.ExpectCommit()

	err := r.Sync(context.Background(), db, keyspace.Table("ops.lock_keys"), keyspace.RegisteredBy("billing-api"))
	if err != nil {
		t.Fatal(err)
	}
}

func TestSyncConflicts(t *testing.T) {
	t.Parallel()
	var r keyspace.Registry
	r.MustRegister(nsBilling)  // ID 7 is "invoices" in the table
	r.MustRegister(nsPayments) // "payments" is ID 80 in the table
	r.MustRegister(advisory.Namespace{ID: 9, Name: "reports"})

	db, m := mock.New(t, exactSQL)
	m.ExpectBegin()
	m.ExpectExec(syncLock).WillReturnResult(rows(1))
	syncExpectProbe(m, `"pgadvisory"."namespaces"`, true, "")
	m.ExpectQuery(syncSelect).WillReturnRows(syncDictRows(
		syncLibraryRow,
		[]driver.Value{int64(7), "invoices", "team-ledger", "", "ledger-svc"},
		[]driver.Value{int64(80), "payments", "team-psp", "", "psp-svc"},
	))
	m.ExpectRollback()

	err := r.Sync(context.Background(), db, keyspace.RegisteredBy("billing-api"))
	if !errors.Is(err, keyspace.ErrConflict) {
		t.Fatalf("Sync = %v, want ErrConflict", err)
	}
	want := `keyspace: sync namespaces to "pgadvisory"."namespaces": 2 namespace conflicts:` +
		"\n\t" + `ID 7 is already 7 "invoices" (owner team-ledger), registered by "ledger-svc"; cannot register 7 "billing" (owner team-payments)` +
		"\n\t" + `name "payments" is already 80 "payments" (owner team-psp), registered by "psp-svc"; cannot register 8 "payments" (owner team-payments)`
	if err.Error() != want {
		t.Errorf("Sync error:\n%s\nwant:\n%s", err, want)
	}
	var ce *keyspace.ConflictError
	if !errors.As(err, &ce) || ce.RegisteredBy != "ledger-svc" || ce.Existing.Name != "invoices" || ce.Namespace != nsBilling {
		t.Errorf("first ConflictError = %+v", ce)
	}
}

func TestSyncLibraryRowTaken(t *testing.T) {
	t.Parallel()
	var r keyspace.Registry
	db, m := mock.New(t, exactSQL)
	m.ExpectBegin()
	m.ExpectExec(syncLock).WillReturnResult(rows(1))
	syncExpectProbe(m, `"pgadvisory"."namespaces"`, true, "")
	m.ExpectQuery(syncSelect).WillReturnRows(syncDictRows(
		[]driver.Value{int64(-2147483648), "squatter", "", "", "someone"},
	))
	m.ExpectRollback()
	err := r.Sync(context.Background(), db, keyspace.RegisteredBy("x"))
	if !errors.Is(err, keyspace.ErrConflict) || !strings.Contains(err.Error(), `"squatter"`) {
		t.Errorf("Sync = %v, want a conflict with the squatter", err)
	}
}

func TestSyncErrors(t *testing.T) {
	t.Parallel()
	errDriver := errors.New("connection reset")
	tests := []struct {
		name    string
		opts    []keyspace.Option
		expect  func(m sqlmock.Sqlmock)
		wantErr error
		wantMsg string
	}{
		{name: "BadTable", opts: []keyspace.Option{keyspace.Table(`x"; DROP TABLE y; --`)},
			wantMsg: `keyspace: bad option: Table("x\"; DROP TABLE y; --")`},
		{name: "TooManyParts", opts: []keyspace.Option{keyspace.Table("a.b.c")}, wantMsg: "want table or schema.table"},
		{name: "EmptyTable", opts: []keyspace.Option{keyspace.Table("")}, wantMsg: "not a plain identifier"},
		{name: "LongTable", opts: []keyspace.Option{keyspace.Table(strings.Repeat("t", 64))}, wantMsg: "at most 63 bytes"},
		{name: "DigitFirst", opts: []keyspace.Option{keyspace.Table("ops.1t")}, wantMsg: `"1t" is not a plain identifier`},
		// The key is busy, and the session's lock_timeout runs out
		// before the first slice of the wait: the wait reads the
		// settings right after the try, in the scope's transaction.
		{name: "LockTimeout", expect: func(m sqlmock.Sqlmock) {
			m.ExpectBegin()
			m.ExpectExec(syncLock).WillReturnResult(rows(0))
			// Answered after the 1ms lock_timeout has passed, so that no
			// slice is left.
			m.ExpectQuery(sqltext.WaitSettings).WillDelayFor(2 * time.Millisecond).WillReturnRows(
				sqlmock.NewRows([]string{"lock_timeout", "statement_timeout", "deadlock_timeout", "in_block"}).AddRow("1ms", "0", "1s", true))
			m.ExpectRollback()
		}, wantErr: advisory.ErrLockTimeout, wantMsg: "the session's lock_timeout ran out"},
		{name: "ProbeFails", expect: func(m sqlmock.Sqlmock) {
			m.ExpectBegin()
			m.ExpectExec(syncLock).WillReturnResult(rows(1))
			m.ExpectQuery(syncProbe).WillReturnError(errDriver)
			m.ExpectRollback()
		}, wantErr: errDriver, wantMsg: `keyspace: sync namespaces to "pgadvisory"."namespaces": look for the table: connection reset`},
		{name: "CreateFails", expect: func(m sqlmock.Sqlmock) {
			m.ExpectBegin()
			m.ExpectExec(syncLock).WillReturnResult(rows(1))
			syncExpectProbe(m, `"pgadvisory"."namespaces"`, false, "app")
			syncExpectCreate(m)
			m.ExpectExec(syncCreate).WillReturnError(errDriver)
			m.ExpectRollback()
		}, wantErr: errDriver, wantMsg: `keyspace: sync namespaces to "pgadvisory"."namespaces": create table: connection reset`},
		{name: "EarlierRelease", expect: func(m sqlmock.Sqlmock) {
			m.ExpectBegin()
			m.ExpectExec(syncLock).WillReturnResult(rows(1))
			syncExpectProbe(m, `"pgadvisory"."namespaces"`, false, "app")
			m.ExpectQuery(sqltext.TablesNamed).WithArgs("pgadvisory_namespaces").
				WillReturnRows(sqlmock.NewRows([]string{"nspname"}).AddRow("public").AddRow("tenant"))
			m.ExpectRollback()
		}, wantMsg: `keyspace: sync namespaces to "pgadvisory"."namespaces": pgadvisory_namespaces, the default table of an ` +
			`earlier release, exists (in schema public, tenant) and pgadvisory.namespaces does not: move it with ` +
			`CREATE SCHEMA IF NOT EXISTS pgadvisory; ALTER TABLE public.pgadvisory_namespaces SET SCHEMA pgadvisory; ` +
			`ALTER TABLE pgadvisory.pgadvisory_namespaces RENAME TO namespaces; ` +
			`or keep using it with keyspace.Table("public.pgadvisory_namespaces")`},
		{name: "ReadFails", expect: func(m sqlmock.Sqlmock) {
			m.ExpectBegin()
			m.ExpectExec(syncLock).WillReturnResult(rows(1))
			syncExpectProbe(m, `"pgadvisory"."namespaces"`, true, "app")
			m.ExpectQuery(syncSelect).WillReturnError(errDriver)
			m.ExpectRollback()
		}, wantErr: errDriver, wantMsg: "read table: connection reset"},
		{name: "InsertFails", expect: func(m sqlmock.Sqlmock) {
			m.ExpectBegin()
			m.ExpectExec(syncLock).WillReturnResult(rows(1))
			syncExpectProbe(m, `"pgadvisory"."namespaces"`, true, "app")
			m.ExpectQuery(syncSelect).WillReturnRows(syncDictRows())
			m.ExpectExec(syncInsert).WillReturnError(&sqlState{"23505", "duplicate key"})
			m.ExpectRollback()
		}, wantMsg: `write namespace -2147483648 "pgadvisory" (owner github.com/pgadvisory/pgadvisory): driver: duplicate key`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db, m := mock.New(t, exactSQL)
			if tt.expect != nil {
				tt.expect(m)
			}
			var r keyspace.Registry
			err := r.Sync(context.Background(), db, tt.opts...)
			if err == nil {
				t.Fatal("Sync = nil, want an error")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Sync = %v, want errors.Is %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) || !strings.HasPrefix(err.Error(), "keyspace: ") {
				t.Errorf("Sync = %q, want it to contain %q", err, tt.wantMsg)
			}
		})
	}
}

func TestSyncNilDB(t *testing.T) {
	t.Parallel()
	var r keyspace.Registry
	if err := r.Sync(context.Background(), nil); err == nil || !strings.HasPrefix(err.Error(), "keyspace: ") {
		t.Errorf("Sync(nil) = %v", err)
	}
}

// TestRegisteredByProgram records the program's file name when neither
// RegisteredBy nor application_name says who registers.
func TestRegisteredByProgram(t *testing.T) {
	t.Parallel()
	var r keyspace.Registry
	r.MustRegister(nsBilling)
	db, m := mock.New(t, exactSQL)
	m.ExpectBegin()
	m.ExpectExec(syncLock).WillReturnResult(rows(1))
	syncExpectProbe(m, `"pgadvisory"."namespaces"`, true, "")
	m.ExpectQuery(syncSelect).WillReturnRows(syncDictRows(syncLibraryRow))
	m.ExpectExec(syncInsert).WithArgs(int64(7), "billing", "team-payments", "invoice runs", filepath.Base(os.Args[0])).
		WillReturnResult(rows(1))
	m.ExpectCommit()
	if err := r.Sync(context.Background(), db); err != nil {
		t.Fatal(err)
	}
}
