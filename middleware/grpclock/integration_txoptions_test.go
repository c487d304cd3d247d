package grpclock_test

import (
	"context"
	"database/sql"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/grpclock"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// TestIntegrationTxOptions checks, on real servers, that TxOptions reach
// a unary call's transaction: the handler reads the isolation level and
// the read-only flag the server reports for it. A mock ignores both, so
// only a server proves this.
func TestIntegrationTxOptions(t *testing.T) {
	pgtest.Each(t, func(t *testing.T, tg pgtest.Target) {
		tests := []struct {
			name string
			opts *sql.TxOptions
			want string
		}{
			{"Default", nil, "read committed off"},
			{"SerializableReadOnly", &sql.TxOptions{Isolation: sql.LevelSerializable, ReadOnly: true}, "serializable on"},
			{"RepeatableRead", &sql.TxOptions{Isolation: sql.LevelRepeatableRead}, "repeatable read off"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				var got string
				svc := &ordersService{unary: func(ctx context.Context, _ proto.Message) error {
					tx, _ := advisory.TxFromContext(ctx)
					var iso, ro string
					err := tx.QueryRowContext(ctx,
						"SELECT current_setting('transaction_isolation'), current_setting('transaction_read_only')").Scan(&iso, &ro)
					got = iso + " " + ro
					return err
				}}
				conn := startServer(t, svc, grpc.UnaryInterceptor(
					grpclock.UnaryServerInterceptor(tg.DB, grpclock.FieldKey(testNamespace(t), "value"), grpclock.TxOptions(tt.opts))))
				if err := pay(ctxWith(t), conn, 42); err != nil || got != tt.want {
					t.Errorf("got %q, %v; want %q", got, err, tt.want)
				}
			})
		}
		pgtest.AwaitIdle(t, tg.DB)
	})
}
