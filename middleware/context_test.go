package middleware_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/pgadvisory/pgadvisory/middleware"
)

func TestContext(t *testing.T) {
	t.Parallel()
	if tx, ok := middleware.TxFromContext(context.Background()); ok || tx != nil {
		t.Errorf("empty context gave %v, %v", tx, ok)
	}
	if _, ok := middleware.TxFromContext(middleware.NewContext(context.Background(), nil)); ok {
		t.Error("a nil *sql.Tx was reported present")
	}
	type otherKey struct{}
	if _, ok := middleware.TxFromContext(context.WithValue(context.Background(), otherKey{}, &sql.Tx{})); ok {
		t.Error("a value under another key was found")
	}
	tx := &sql.Tx{}
	got, ok := middleware.TxFromContext(middleware.NewContext(context.Background(), tx))
	if !ok || got != tx {
		t.Errorf("got %p, %v; want %p, true", got, ok, tx)
	}
}
