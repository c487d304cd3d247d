package grpclock_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The test service is registered by hand on well-known message types, so
// that the tests need no generated code:
//
//	service Orders {
//	  rpc Pay(google.protobuf.Int64Value) returns (google.protobuf.Empty);      // locks on field "value"
//	  rpc Rename(google.protobuf.StringValue) returns (google.protobuf.Empty);  // locks on field "value"
//	  rpc Watch(google.protobuf.Empty) returns (stream google.protobuf.StringValue); // locks on metadata
//	}
const (
	methodPay    = "/pgadvisory.test.Orders/Pay"
	methodRename = "/pgadvisory.test.Orders/Rename"
	methodWatch  = "/pgadvisory.test.Orders/Watch"
)

// ordersService implements the test service with the functions it holds.
type ordersService struct {
	unary  func(ctx context.Context, req proto.Message) error
	stream func(ss grpc.ServerStream) error
}

var ordersDesc = grpc.ServiceDesc{
	ServiceName: "pgadvisory.test.Orders",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Pay", Handler: unaryHandler(methodPay, func() proto.Message { return new(wrapperspb.Int64Value) })},
		{MethodName: "Rename", Handler: unaryHandler(methodRename, func() proto.Message { return new(wrapperspb.StringValue) })},
	},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Watch",
		ServerStreams: true,
		Handler: func(srv any, ss grpc.ServerStream) error {
			if err := ss.RecvMsg(new(emptypb.Empty)); err != nil {
				return err
			}
			return srv.(*ordersService).stream(ss)
		},
	}},
}

// unaryHandler is what protoc-gen-go-grpc would generate for a unary method.
func unaryHandler(method string, newReq func() proto.Message) func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) {
	return func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		req := newReq()
		if err := dec(req); err != nil {
			return nil, err
		}
		call := func(ctx context.Context, req any) (any, error) {
			if err := srv.(*ordersService).unary(ctx, req.(proto.Message)); err != nil {
				return nil, err
			}
			return &emptypb.Empty{}, nil
		}
		if interceptor == nil {
			return call(ctx, req)
		}
		return interceptor(ctx, req, &grpc.UnaryServerInfo{Server: srv, FullMethod: method}, call)
	}
}

// startServer serves svc over an in-memory connection with opts, and
// returns a client connection; both end at cleanup.
func startServer(t *testing.T, svc *ordersService, opts ...grpc.ServerOption) *grpc.ClientConn {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	// WaitForHandlers makes Stop wait for every handler, so that no
	// goroutine of the test outlives it.
	srv := grpc.NewServer(append(opts, grpc.WaitForHandlers(true))...)
	srv.RegisterService(&ordersDesc, svc)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("serve: %v", err)
		}
	})
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// pay calls Pay(id).
func pay(ctx context.Context, conn *grpc.ClientConn, id int64) error {
	return conn.Invoke(ctx, methodPay, wrapperspb.Int64(id), new(emptypb.Empty))
}

// watch calls Watch with the metadata kv and returns the messages it got
// and the call's final error.
func watch(ctx context.Context, conn *grpc.ClientConn, kv ...string) ([]string, error) {
	ctx = metadata.AppendToOutgoingContext(ctx, kv...)
	cs, err := conn.NewStream(ctx, &ordersDesc.Streams[0], methodWatch)
	if err != nil {
		return nil, err
	}
	if err := cs.SendMsg(&emptypb.Empty{}); err != nil {
		return nil, err
	}
	if err := cs.CloseSend(); err != nil {
		return nil, err
	}
	var got []string
	for {
		m := new(wrapperspb.StringValue)
		err := cs.RecvMsg(m)
		if err == io.EOF {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		got = append(got, m.GetValue())
	}
}
