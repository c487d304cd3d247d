package scope

import (
	"context"
	"database/sql"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/lib/pq"

	"github.com/pgadvisory/pgadvisory/internal/sqltext"
)

func TestFormOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		v    any
		want sqltext.Form
	}{
		{"pgx driver", stdlib.GetDefaultDriver(), sqltext.Params},
		{"pgx conn", &stdlib.Conn{}, sqltext.Params},
		{"lib/pq driver", &pq.Driver{}, sqltext.Inline},
		{"nil", nil, sqltext.Inline},
		{"not a pointer", 42, sqltext.Inline},
	}
	for _, tt := range tests {
		if got := formOf(tt.v); got != tt.want {
			t.Errorf("%s: formOf(%T) = %v; want %v", tt.name, tt.v, got, tt.want)
		}
	}
}

func TestFormWithoutADriverToAsk(t *testing.T) {
	t.Parallel()
	db, _, err := sqlmock.New()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if got := DBForm(db); got != sqltext.Inline {
		t.Errorf("DBForm(sqlmock) = %v; want Inline", got)
	}
	if got := DBForm(nil); got != sqltext.Inline {
		t.Errorf("DBForm(nil) = %v; want Inline", got)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := ConnForm(conn); got != sqltext.Inline {
		t.Errorf("ConnForm(sqlmock) = %v; want Inline", got)
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	if got := ConnForm(conn); got != sqltext.Inline {
		t.Errorf("ConnForm(closed) = %v; want Inline", got)
	}
	if got := ConnForm(nil); got != sqltext.Inline {
		t.Errorf("ConnForm(nil) = %v; want Inline", got)
	}
	// A transaction is asked through its *sql.DB; a zero Tx has none.
	var tx sql.Tx
	if got := TxForm(&tx); got != sqltext.Inline {
		t.Errorf("TxForm(zero Tx) = %v; want Inline", got)
	}
	if got := TxForm(nil); got != sqltext.Inline {
		t.Errorf("TxForm(nil) = %v; want Inline", got)
	}
}

// TestTxDB fails when a Go release moves or retypes the field of sql.Tx
// that txDB reads: transactions would still work, in the Inline form, but
// a caller's transaction on pgx would lose its parameter form unseen.
func TestTxDB(t *testing.T) {
	t.Parallel()
	if txDBField < 0 {
		t.Fatal("sql.Tx has no field db of type *sql.DB: txDB cannot find a transaction's *sql.DB")
	}
	db, mock, err := sqlmock.New()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mock.ExpectBegin()
	mock.ExpectRollback()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := txDB(tx); got != db {
		t.Errorf("txDB(tx) = %p; want the *sql.DB it was begun on, %p", got, db)
	}
	if got := TxForm(tx); got != sqltext.Inline {
		t.Errorf("TxForm(sqlmock's tx) = %v; want Inline", got)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	// A transaction that has ended keeps its *sql.DB.
	if got := txDB(tx); got != db {
		t.Errorf("txDB(ended tx) = %p; want %p", got, db)
	}
	if got := txDB(nil); got != nil {
		t.Errorf("txDB(nil) = %p; want nil", got)
	}
	if err := mock.ExpectationsWereMet(); err != nil {
		t.Error(err)
	}
}

// BenchmarkTxForm measures what finding a caller's transaction's form
// costs on each call: no allocation, a few nanoseconds.
func BenchmarkTxForm(b *testing.B) {
	db, mock, err := sqlmock.New()
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	mock.ExpectBegin()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if TxForm(tx) != sqltext.Inline {
			b.Fatal("not Inline")
		}
	}
}
