package pgtest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/lib/pq" // the "postgres" driver, used for probes and DriverPQ
)

// Server is one running PostgreSQL.
type Server struct {
	// Name is a short label for subtest names, such as "pg15" or "pg17",
	// taken from the major version. A second server with the same major
	// version is named "pg17-2", and so on.
	Name string
	// Version is the server's major version, such as 15 or 17.
	Version int
	// DSN is a URL that both drivers accept, such as
	// postgres://postgres@127.0.0.1:32768/postgres?sslmode=disable.
	// For a server from [Server.PgBouncer] it leads through PgBouncer and
	// lacks the parameters each driver needs there: open it with
	// [Server.Open] or [Server.OpenDB], which add them.
	DSN string

	ctl    control // restarts and pauses a dedicated server; nil otherwise
	pooler bool    // DSN leads through PgBouncer in transaction mode
}

// String returns the server's name.
func (s *Server) String() string { return s.Name }

// shared holds the servers of [Servers], started once per test binary.
var shared struct {
	once    sync.Once
	servers []*Server
	notes   []string
	err     error
	logged  atomic.Bool
}

// mainCalled records that [Main] runs the tests, so that shared servers
// will be stopped.
var mainCalled atomic.Bool

// Servers returns every configured server. The first call starts them; they
// run until [Main] stops them when the test binary ends. A test binary whose
// TestMain does not call [Main] fails here, since nothing would stop them.
//
// Under go test -short, Servers skips the test before it looks for a server:
// no container, no cluster and no PGADVISORY_TEST_DSN are touched, also under
// CI=true, since -short is the caller's explicit choice.
//
// When no server can be had, Servers skips the test, or fails it under
// CI=true. A failed start is tried once per binary: every later call reports
// the same error.
func Servers(tb testing.TB) []*Server {
	tb.Helper()
	skipShort(tb)
	if !mainCalled.Load() {
		tb.Fatal("pgtest: Servers needs the package's TestMain to call pgtest.Main(m), which stops the servers")
	}
	shared.once.Do(func() {
		r := start(context.Background(), nil, false, false)
		shared.servers, shared.notes, shared.err = r.servers, r.notes, r.err
	})
	if !shared.logged.Swap(true) {
		for _, n := range shared.notes {
			tb.Log("pgtest: " + n)
		}
	}
	if shared.err != nil {
		report(tb, shared.err)
	}
	return slices.Clone(shared.servers)
}

// StartServer starts dedicated servers for one test, with extra postgres
// arguments: one per configured Docker image, or one local cluster. They
// stop at tb's cleanup. Each "-c", "name=value" pair sets a server setting
// from the start, as in postgresql.conf, for example a small lock table or
// a timeout that ends idle sessions:
//
//	pgtest.StartServer(t, "-c", "max_locks_per_transaction=10")
//	pgtest.StartServer(t, "-c", "idle_session_timeout=500ms")
//
// A setting the server does not know fails the start, and the report shows
// the server's complaint. No other test shares a dedicated server, so a test
// may also [Server.Restart] and [Server.Pause] it.
//
// When PGADVISORY_TEST_DSN names existing servers, the harness cannot start
// any, and StartServer returns nil: the caller decides whether to skip.
// Otherwise a failure skips the test, or fails it under CI=true. Under
// go test -short, StartServer skips the test, as [Servers] does.
func StartServer(tb testing.TB, args ...string) []*Server {
	tb.Helper()
	skipShort(tb)
	if len(list(os.Getenv(envDSN))) > 0 {
		return nil
	}
	r := start(context.Background(), args, false, true)
	for _, n := range r.notes {
		tb.Log("pgtest: " + n)
	}
	if r.err != nil {
		report(tb, r.err)
	}
	tb.Cleanup(r.stop)
	return r.servers
}

// shortSkip is why [Servers] and [StartServer] skip a test under
// go test -short.
const shortSkip = "pgtest: integration test skipped under -short, which starts no PostgreSQL"

// skipShort skips tb under go test -short, the fast unit loop: the user asked
// for no servers, so this is a skip even under CI=true, where a missing
// database fails.
func skipShort(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skipf("%s", shortSkip)
	}
}

// report fails tb under CI, where a missing database is a failure, and skips
// it elsewhere.
func report(tb testing.TB, err error) {
	tb.Helper()
	if underCI() {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Skipf("pgtest: %v (skipping; under CI=true this fails)", err)
}

// name sets each server's Name from its major version.
func name(servers []*Server) {
	seen := make(map[int]int)
	for _, s := range servers {
		seen[s.Version]++
		s.Name = "pg" + strconv.Itoa(s.Version)
		if n := seen[s.Version]; n > 1 {
			s.Name += "-" + strconv.Itoa(n)
		}
	}
}

// probe connects to dsn and returns the server's major version.
func probe(ctx context.Context, dsn string) (int, error) {
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var num string
	if err := db.QueryRowContext(ctx, "SHOW server_version_num").Scan(&num); err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(num)
	if err != nil {
		return 0, fmt.Errorf("server_version_num %q: %w", num, err)
	}
	return n / 10000, nil
}

// waitReady probes dsn until the server answers, ctx ends, maxWait passes or
// alive reports that the server is gone. It returns the major version.
func waitReady(ctx context.Context, dsn string, maxWait time.Duration, alive func() error) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, maxWait)
	defer cancel()
	var last error
	for {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		v, err := probe(pctx, dsn)
		pcancel()
		if err == nil {
			return v, nil
		}
		last = err
		if alive != nil {
			if err := alive(); err != nil {
				return 0, err
			}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("server did not answer within %v: %w", maxWait, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
