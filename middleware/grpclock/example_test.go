package grpclock_test

import (
	"context"
	"fmt"
	"log"
	"net"

	"github.com/DATA-DOG/go-sqlmock"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pgadvisory/pgadvisory/middleware"
	"github.com/pgadvisory/pgadvisory/middleware/grpclock"
)

// Lock each Pay call on the order id in its request. The first call finds
// order 42 free and commits; the second finds it held and is refused.
func ExampleUnaryServerInterceptor() {
	db, m, err := sqlmock.New(sqlmock.QueryMatcherOption(sqlmock.QueryMatcherEqual))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	m.ExpectBegin()
	m.ExpectExec("SELECT 1 WHERE pg_try_advisory_xact_lock(7,42)").WillReturnResult(sqlmock.NewResult(0, 1))
	m.ExpectExec("UPDATE orders SET paid = true WHERE id = $1").WithArgs(int64(42)).WillReturnResult(sqlmock.NewResult(0, 1))
	m.ExpectCommit()
	m.ExpectBegin()
	m.ExpectExec("SELECT 1 WHERE pg_try_advisory_xact_lock(7,42)").WillReturnResult(sqlmock.NewResult(0, 0)) // held elsewhere
	m.ExpectRollback()

	// The service's handler works in the call's transaction.
	payOrder := func(ctx context.Context, req proto.Message) error {
		tx, _ := middleware.TxFromContext(ctx)
		id := req.(*wrapperspb.Int64Value).GetValue()
		_, err := tx.ExecContext(ctx, "UPDATE orders SET paid = true WHERE id = $1", id)
		return err
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(
		grpclock.UnaryServerInterceptor(db, grpclock.FieldKey(7, "value")),
	))
	srv.RegisterService(&ordersDesc, &ordersService{unary: payOrder})
	lis := bufconn.Listen(1 << 16)
	go srv.Serve(lis)
	defer srv.Stop()

	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	for range 2 {
		err := pay(context.Background(), conn, 42)
		fmt.Println(status.Code(err))
	}
	// Output:
	// OK
	// Aborted
}

// FieldKey reads a field of any proto message: integers become a pair key,
// strings a hashed name key.
func ExampleFieldKey() {
	key := grpclock.FieldKey(7, "value")
	k, err := key(context.Background(), "/shop.Orders/Pay", wrapperspb.Int64(42))
	fmt.Println(k, err)
	_, err = key(context.Background(), "/shop.Orders/Pay", wrapperspb.Int64(1<<40))
	fmt.Println(err)
	// Output:
	// 7:42 <nil>
	// grpclock: bad lock key: field "value" = 1099511627776: out of range [-2147483648, 2147483647]
}

// MetadataKey locks a stream on a metadata entry, hashed as
// advisory.NameKey.
func ExampleMetadataKey() {
	key := grpclock.MetadataKey(9, "x-tenant")
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-tenant", "acme"))
	k, err := key(ctx, "/shop.Reports/Stream")
	fmt.Println(k, err)
	// Output:
	// 9:-1850687378 <nil>
}
