package advisory_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/pgadvisory/pgadvisory/advisory"
)

func TestTxContext(t *testing.T) {
	t.Parallel()
	if tx, ok := advisory.TxFromContext(context.Background()); ok || tx != nil {
		t.Errorf("empty context gave %v, %v", tx, ok)
	}
	if _, ok := advisory.TxFromContext(advisory.NewTxContext(context.Background(), nil)); ok {
		t.Error("a nil *sql.Tx was reported present")
	}
	type otherKey struct{}
	if _, ok := advisory.TxFromContext(context.WithValue(context.Background(), otherKey{}, &sql.Tx{})); ok {
		t.Error("a value under another key was found")
	}
	tx := &sql.Tx{}
	got, ok := advisory.TxFromContext(advisory.NewTxContext(context.Background(), tx))
	if !ok || got != tx {
		t.Errorf("got %p, %v; want %p, true", got, ok, tx)
	}
}
