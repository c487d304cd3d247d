package main

import (
	"context"
	"errors"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pgadvisory/pgadvisory/advisory/inspect"
	"github.com/pgadvisory/pgadvisory/advisory/keyspace"
	"github.com/pgadvisory/pgadvisory/integrations/advisoryprom"
)

var cmdServe = &command{
	name:      "serve",
	usageLine: "serve [--listen addr] [--refresh d] [--dsn dsn]",
	short:     "serve lock metrics and a page of who holds and who waits",
	long:      helpServe,
	run:       runServe,
}

const helpServe = `
Serve serves the advisory lock state of the current database over HTTP:

	/          a page: who holds which lock and who waits for it, with
	           namespace names from the dictionary table
	           (pgadvisory.namespaces, when it exists), hold and wait ages,
	           and the wait graph, drawn on the server; ?refresh=N reloads
	           it every N seconds (0: never)
	/metrics   metrics for Prometheus: locks held and awaited by namespace,
	           the oldest hold, the longest wait, blocked sessions and idle
	           sessions holding a session lock (see docs/lockstate.md)

Each scrape of /metrics runs one read-only statement; each view of the page
reads the dictionary table and the locks. Neither takes a lock. The
namespace names of /metrics come from the dictionary table as read at
start, on each view of the page and every minute.

The page shows application names, users and session states, never queries;
it is meant for the people who run the database: listen on a local or
internal address. SIGINT or SIGTERM stops the server after the requests in
flight (at most 5 seconds).

The flags are:

	--listen addr
		The address to listen on (default localhost:9650); port 0 picks a
		free one. The address is printed on stderr.
	--refresh d
		Reload the page every d by default (default 10s; 0 never).
	--dsn dsn
		The database; see 'pgadvisory help connect'.
`

// Defaults and bounds of serve.
const (
	defaultListen     = "localhost:9650"
	defaultRefresh    = 10 * time.Second
	dictionaryRefresh = time.Minute
	shutdownTimeout   = 5 * time.Second
	serveMaxConns     = 4
)

func runServe(ctx context.Context, e *env, cmd *command, args []string) int {
	listen := defaultListen
	refresh := durationValue(defaultRefresh)
	fs := newFlagSet(e, cmd)
	fs.StringVar(&listen, "listen", listen, "")
	durationFlag(fs, &refresh, "refresh")
	dsn := dsnFlag(fs)
	if code := parseFlags(e, cmd, fs, args); code >= 0 {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(e, cmd, "unexpected argument %q", fs.Arg(0))
	}
	if refresh > durationValue(maxRefresh*time.Second) {
		return usageError(e, cmd, "--refresh %v: at most %v", refresh.String(), maxRefresh*time.Second)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, sigterm)
	defer stop()

	db, err := openDB(ctx, e, *dsn, "pgadvisory serve")
	if err != nil {
		return fail(e, cmd, exitUnavailable, "%v", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(serveMaxConns)
	db.SetMaxIdleConns(serveMaxConns)

	logger := log.New(e.stderr, "pgadvisory serve: ", log.LstdFlags)
	st := &serveState{db: db, names: new(keyspace.Registry)}
	if err := db.QueryRowContext(ctx, `SELECT pg_catalog.current_database()`).Scan(&st.database); err != nil {
		return fail(e, cmd, exitUnavailable, "%v", db.redact.err(err))
	}
	if _, err := st.loadNames(ctx); err != nil {
		return fail(e, cmd, exitUnavailable, "%v", err)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(advisoryprom.NewCollector(db.DB,
		advisoryprom.WithRegistry(st.names),
		advisoryprom.OnError(func(err error) { logger.Print(db.redact.err(err)) }),
	))
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: logger})

	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fail(e, cmd, exitError, "%v", err)
	}
	srv := &http.Server{
		Handler:           newServeHandler(st.read, metrics, refreshSeconds(time.Duration(refresh))),
		ReadHeaderTimeout: 10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          logger,
	}
	logger.Printf("listening on http://%s/ (metrics at /metrics)", ln.Addr())

	var wg sync.WaitGroup
	served := make(chan error, 1)
	wg.Go(func() { served <- srv.Serve(ln) })
	wg.Go(func() { st.refreshNames(ctx, logger) })
	defer wg.Wait()

	select {
	case err := <-served:
		stop()
		return fail(e, cmd, exitError, "%v", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	err = srv.Shutdown(shutdownCtx)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return fail(e, cmd, exitError, "stopping: %v", err)
	}
	logger.Print("stopped")
	return exitOK
}

// serveState is what serve's handlers share: the database and the
// namespaces read from its dictionary table.
type serveState struct {
	db       *database
	database string
	// names holds every namespace the dictionary table has named since
	// serve started. The table's rows are never deleted or renamed, so
	// a registry that only grows stays right.
	names *keyspace.Registry
}

// loadNames reads the dictionary table and adds its namespaces to names.
func (s *serveState) loadNames(ctx context.Context) (*dictionary, error) {
	d, err := loadDictionary(ctx, s.db)
	if err != nil {
		return nil, err
	}
	for _, ns := range d.registry.Namespaces() {
		// A row that conflicts with one read before names nothing
		// reliably, as loadDictionary says: the first one stays.
		_ = s.names.Register(ns)
	}
	return d, nil
}

// refreshNames reloads the dictionary table every dictionaryRefresh until
// ctx ends, so that /metrics names namespaces registered since serve
// started even when nobody views the page.
func (s *serveState) refreshNames(ctx context.Context, logger *log.Logger) {
	t := time.NewTicker(dictionaryRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := s.loadNames(ctx); err != nil && ctx.Err() == nil {
				logger.Print(err)
			}
		}
	}
}

// read reads the lock state for one view of the page.
func (s *serveState) read(ctx context.Context) (lockState, error) {
	st := lockState{Database: s.database, Read: time.Now()}
	d, err := s.loadNames(ctx)
	if err != nil {
		return st, err
	}
	if d.exists {
		st.Dictionary = d.table
	}
	st.Namespaces = d.registry.Namespaces()
	locks, err := inspect.Locks(ctx, s.db.DB, inspect.WithRegistry(s.names))
	if err != nil {
		return st, s.db.redact.err(err)
	}
	st.Locks, st.Read = locks, time.Now()
	return st, nil
}
