package scope

import (
	"testing"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/lib/pq"
)

// TestUnpoolWithoutAConnection shows that unpool leaves alone what it
// cannot close, without a panic: nil, values of no driver, lib/pq's
// driver, pgx's driver (a type of pgx's without a Conn method), and a
// connection of pgx's driver with no pgx connection under it. The close itself is proven
// against a server, by TestSessionIntegration/PgxPoolDiscard in advisory.
func TestUnpoolWithoutAConnection(t *testing.T) {
	t.Parallel()
	for _, dc := range []any{nil, 42, &pq.Driver{}, &stdlib.Conn{}, stdlib.GetDefaultDriver()} {
		unpool(dc) // must not panic
	}
}
