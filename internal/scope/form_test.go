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
	// A caller's transaction has no driver to ask; a scope's has.
	var tx sql.Tx
	if got := TxForm(ctx, &tx); got != sqltext.Inline {
		t.Errorf("TxForm(caller's) = %v; want Inline", got)
	}
	sctx := context.WithValue(ctx, xactScopeKey{}, &xactScope{tx: &tx, form: sqltext.Params})
	if got := TxForm(sctx, &tx); got != sqltext.Params {
		t.Errorf("TxForm(scope's) = %v; want Params", got)
	}
	if got := TxForm(sctx, new(sql.Tx)); got != sqltext.Inline {
		t.Errorf("TxForm(another tx in a scope's ctx) = %v; want Inline", got)
	}
}
