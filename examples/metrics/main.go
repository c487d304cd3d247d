// Command metrics shows the library's observations exported as Prometheus
// metrics: an advisory.Observer that counts acquisitions by outcome,
// releases and lost leases, and times the waits.
//
// It takes a few locks, one of them on a key that is busy, and then prints
// what a Prometheus server scraping /metrics would read.
//
//	go -C examples run ./metrics [-driver pq|pgx] [-listen :9100]
//
// With -listen it keeps serving /metrics until interrupted. It uses the
// database in DATABASE_URL when that is set; otherwise it starts a
// disposable PostgreSQL and removes it when it ends.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

func main() {
	driver := flag.String("driver", "pq", "database/sql driver: pq or pgx")
	listen := flag.String("listen", "", "serve /metrics on this address until interrupted")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, *driver, *listen); err != nil {
		fmt.Fprintln(os.Stderr, "metrics:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, driver, listen string) error {
	db, about, closeDB, err := pgtest.OpenExample(ctx, driver, out)
	if err != nil {
		return err
	}
	defer closeDB()
	fmt.Fprintln(out, about)

	reg := prometheus.NewRegistry()
	advisory.SetObserver(newMetrics(reg))
	defer advisory.SetObserver(nil)

	if err := takeSomeLocks(ctx, db); err != nil {
		return err
	}

	handler := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	if listen != "" {
		fmt.Fprintf(out, "serving /metrics on %s\n", listen)
		srv := &http.Server{Addr: listen, Handler: handler}
		go func() { <-ctx.Done(); _ = srv.Close() }()
		if err := srv.ListenAndServe(); err != http.ErrServerClosed {
			return err
		}
		return nil
	}
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if strings.HasPrefix(line, "pgadvisory_") && !strings.Contains(line, "_bucket") {
			fmt.Fprintln(out, line)
		}
	}
	return nil
}

// takeSomeLocks runs three jobs under transaction locks, and tries one key
// while another session holds it.
func takeSomeLocks(ctx context.Context, db *sql.DB) error {
	for id := int32(1); id <= 3; id++ {
		err := advisory.WithXactLock(ctx, db, advisory.PairKey(1, id),
			func(context.Context, *sql.Tx) error { return nil }, advisory.Try())
		if err != nil {
			return err
		}
	}
	return advisory.WithSessionLock(ctx, db, advisory.PairKey(1, 99), func(ctx context.Context, _ *sql.Conn) error {
		err := advisory.WithXactLock(ctx, db, advisory.PairKey(1, 99),
			func(context.Context, *sql.Tx) error { return nil }, advisory.Try())
		if err == nil {
			return fmt.Errorf("key 1:99 was taken twice")
		}
		return nil // busy, as it should be
	})
}
