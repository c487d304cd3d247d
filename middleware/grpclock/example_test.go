package grpclock_test

import (
	"context"
	"errors"
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

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/middleware/grpclock"
	"github.com/pgadvisory/pgadvisory/mock"
)

// Lock each Pay call on the order id in its request. The first call finds
// order 42 free and commits; the second finds it held and is refused.
func ExampleUnaryServerInterceptor() {
	db, m, err := mock.NewDB(mock.QueryMatcher(sqlmock.QueryMatcherEqual))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	order42 := advisory.PairKey(7, 42)
	mock.ExpectWithXactLock(m, order42, mock.XactGranted, advisory.Try())
	m.ExpectExec("UPDATE orders SET paid = true WHERE id = $1").WithArgs(int64(42)).WillReturnResult(sqlmock.NewResult(0, 1))
	m.ExpectCommit()
	mock.ExpectWithXactLock(m, order42, mock.XactNotAcquired, advisory.Try()) // held elsewhere

	// The service's handler works in the call's transaction.
	payOrder := func(ctx context.Context, req proto.Message) error {
		tx, _ := advisory.TxFromContext(ctx)
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

// FieldKey reads an integer field of any proto message as an int32 id.
func ExampleFieldKey() {
	key := grpclock.FieldKey(7, "value")
	k, err := key(context.Background(), "/shop.Orders/Pay", wrapperspb.Int64(42))
	fmt.Println(k, err)
	_, err = key(context.Background(), "/shop.Orders/Pay", wrapperspb.Int64(1<<40))
	fmt.Println(err)
	// Output:
	// 7:42 <nil>
	// grpclock: bad lock key: field "value" = "1099511627776": out of range [-2147483648, 2147483647]
}

// MetadataNameKey locks a stream on a name in its metadata, hashed as
// advisory.NameKey: for namespaces of names, such as tenants.
func ExampleMetadataNameKey() {
	key := grpclock.MetadataNameKey(9, "x-tenant")
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-tenant", "acme"))
	k, err := key(ctx, "/shop.Reports/Stream")
	fmt.Println(k, err)
	// Output:
	// 9:-1850687378 <nil>
}

// MetadataKey locks a stream on an integer id in its metadata: the same
// key FieldKey gives a unary call whose request holds that id, so that a
// stream and a call on order 42 exclude each other.
func ExampleMetadataKey() {
	stream := grpclock.MetadataKey(7, "x-order-id")
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-order-id", "42"))
	k1, _ := stream(ctx, "/shop.Orders/Watch")
	unary := grpclock.FieldKey(7, "value")
	k2, _ := unary(context.Background(), "/shop.Orders/Pay", wrapperspb.Int64(42))
	fmt.Println(k1, k2, k1 == k2)
	// Output:
	// 7:42 7:42 true
}

// A key function returns grpclock.ErrNoLock for the methods that need
// no lock; they are served without a transaction.
func ExampleKeyFunc_noLock() {
	byOrder := grpclock.FieldKey(7, "value")
	key := func(ctx context.Context, method string, req any) (advisory.Key, error) {
		if method == "/shop.Orders/Get" {
			return advisory.Key{}, grpclock.ErrNoLock
		}
		return byOrder(ctx, method, req)
	}
	_, err := key(context.Background(), "/shop.Orders/Get", wrapperspb.Int64(42))
	fmt.Println(errors.Is(err, grpclock.ErrNoLock))
	k, _ := key(context.Background(), "/shop.Orders/Pay", wrapperspb.Int64(42))
	fmt.Println(k)
	// Output:
	// true
	// 7:42
}
