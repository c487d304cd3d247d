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
}

// TestTxForm gives a transaction the caller began the form of its
// driver's connection (sqlmock's: Inline), and one a scope began, under
// the scope's context, the scope's form.
func TestTxForm(t *testing.T) {
	t.Parallel()
	db, m, err := sqlmock.New()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	m.ExpectBegin()
	m.ExpectBegin()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	scoped := context.WithValue(ctx, xactScopeKey{}, &xactScope{tx: SQLTx(tx), owned: true, form: sqltext.Params})
	tests := []struct {
		name string
		ctx  context.Context
		tx   *sql.Tx
		want sqltext.Form
	}{
		{"CallersTx", ctx, tx, sqltext.Inline},
		{"ScopesTx", scoped, tx, sqltext.Params},
		{"AnotherTxInAScope", scoped, other, sqltext.Inline},
		{"NewTxContext", NewTxContext(ctx, tx), tx, sqltext.Inline},
		{"NilTx", scoped, nil, sqltext.Inline},
	}
	for _, tt := range tests {
		if got := TxForm(tt.ctx, tt.tx); got != tt.want {
			t.Errorf("%s: TxForm = %v; want %v", tt.name, got, tt.want)
		}
	}
	// An ended transaction has no driver's connection to ask: Inline,
	// and the statement fails itself.
	m.ExpectRollback()
	if err := other.Rollback(); err != nil {
		t.Fatal(err)
	}
	if txDriverConn(other) != nil {
		t.Error("txDriverConn(ended) is not nil")
	}
	if got := TxForm(ctx, other); got != sqltext.Inline {
		t.Errorf("EndedTx: TxForm = %v; want Inline", got)
	}
}
