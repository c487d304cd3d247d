// Command httpserver serves POST /orders/{id}, which records a payment for
// an order, behind the net/http middleware of package httplock.
//
// Each request runs in a transaction that holds its order's advisory lock,
// PairKey(1, id), and the transaction commits before the response is
// written. While one request for an order holds its lock, another for the
// same order gets 409 Conflict with Retry-After, and requests for other
// orders go ahead. A malformed id gets 400.
//
//	go -C examples run ./httpserver [-driver pq|pgx] [-addr 127.0.0.1:8080] [-hold 5s]
//	curl -i -X POST http://127.0.0.1:8080/orders/42
//
// With -hold, each payment holds its order's lock that long, as slow work
// would: send two requests for order 42 at once to see the second refused.
//
// It uses the database in DATABASE_URL when that is set, creating and then
// dropping a schema of its own. Otherwise it starts a disposable PostgreSQL
// (in Docker, or from local initdb and postgres binaries) and removes it
// when it stops.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/pgadvisory/pgadvisory/middleware/httplock"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// ordersNS is the lock namespace of orders: order 42's key is
// PairKey(ordersNS, 42).
const ordersNS = 1

func main() {
	driver := flag.String("driver", "pq", "database/sql driver: pq or pgx")
	addr := flag.String("addr", "127.0.0.1:8080", "address to serve on")
	hold := flag.Duration("hold", 0, "how long each payment holds its order's lock")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Stdout, *driver, *addr, *hold); err != nil {
		fmt.Fprintln(os.Stderr, "httpserver:", err)
		os.Exit(1)
	}
}

// run opens the database, creates the orders, and serves on addr until
// ctx ends.
func run(ctx context.Context, out io.Writer, driver, addr string, hold time.Duration) error {
	db, about, closeDB, err := pgtest.OpenExample(ctx, driver, out)
	if err != nil {
		return err
	}
	defer closeDB()
	fmt.Fprintln(out, about)

	orders, err := createOrders(ctx, db, hold)
	if err != nil {
		return err
	}
	defer orders.drop()

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: routes(db, http.HandlerFunc(orders.pay)), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.Background())
	}()
	fmt.Fprintf(out, "serving POST /orders/{id} for orders 42 and 43 on http://%s until interrupted; try\n", ln.Addr())
	fmt.Fprintf(out, "  curl -i -X POST http://%s/orders/42\n", ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// routes serves POST /orders/{id} with pay behind the order's lock: pay
// runs in a transaction that holds PairKey(ordersNS, id), which it gets
// from advisory.TxFromContext, and that commits before the response goes
// out.
func routes(db *sql.DB, pay http.Handler) http.Handler {
	lock := httplock.XactLock(db, httplock.PathKey(ordersNS, "id"))
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}", lock(pay))
	return mux
}
