package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"
)

// instance is a server that this process started.
type instance struct {
	dsn  string
	stop func()  // stops the server; from track, so [Main] can stop it too
	ctl  control // restarts and pauses it; set for dedicated servers only
}

// started is the outcome of [start].
type started struct {
	servers []*Server
	notes   []string // things worth a line in the test log
	stop    func()   // stops the servers that were started
	err     error
}

// start finds or starts servers in the order the package documentation
// gives, with extra postgres arguments. With first set it starts only the
// first configured image, as [Launch] does. With dedicated set, the servers
// belong to one test, which may restart and pause them: containers get a
// fixed host port and are not removed when they stop.
func start(ctx context.Context, extra []string, first, dedicated bool) started {
	r := started{stop: func() {}}
	if testing.Testing() && testing.Short() {
		// A backstop for the fast unit loop: [Servers] and
		// [StartServer] skip before they get here, and a test that
		// calls [Launch] must skip under -short itself.
		r.err = errShort
		return r
	}
	if dsns := list(os.Getenv(envDSN)); len(dsns) > 0 {
		if first {
			dsns = dsns[:1]
		}
		r.servers, r.err = fromDSN(ctx, dsns)
		return r
	}

	var insts []instance
	var err error
	// Tests under CI fail rather than fall back; an example program, which
	// starts only the first image, takes whatever PostgreSQL it can get.
	strict := underCI() && !first
	pool, dockerErr := dockerPool(ctx)
	if dockerErr != nil && strict && os.Getenv(envImages) != "" {
		// CI asked for these images, and for every version they hold: a
		// single local version instead would pass for the wrong reason.
		r.err = fmt.Errorf("%s is set but Docker is unreachable: %w", envImages, dockerErr)
		return r
	}
	if dockerErr == nil {
		imgs := images()
		if os.Getenv(envImages) == "" {
			imgs = preferLocal(pool, imgs)
		}
		if first {
			imgs = imgs[:1]
		}
		insts, err = startContainers(ctx, pool, imgs, extra, dedicated)
		if err != nil {
			err = fmt.Errorf("docker: %w", err)
			if strict {
				r.err = err
				return r
			}
			r.notes = append(r.notes, fmt.Sprintf("%v; trying local PostgreSQL binaries", err))
		}
	}
	if insts == nil {
		bin, binErr := findBinaries()
		switch {
		case binErr == nil:
			var inst instance
			inst, err = startLocal(ctx, bin, extra, dedicated)
			if err != nil {
				r.err = fmt.Errorf("local PostgreSQL in %s: %w", bin, err)
				return r
			}
			insts = []instance{inst}
		case err != nil:
			r.err = err // Docker failed and there is nothing else
			return r
		default:
			r.err = fmt.Errorf("%s (Docker: %v; local binaries: %v)", howToGetOne, dockerErr, binErr)
			return r
		}
	}

	stops := make([]func(), len(insts))
	for i, inst := range insts {
		stops[i] = inst.stop
		r.servers = append(r.servers, &Server{DSN: inst.dsn, ctl: inst.ctl})
	}
	r.stop = func() { stopEach(stops) }
	for _, s := range r.servers {
		vctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		s.Version, err = probe(vctx, s.DSN)
		cancel()
		if err != nil {
			r.stop()
			r.servers, r.stop = nil, func() {}
			r.err = fmt.Errorf("server %s: %w", redact(s.DSN), err)
			return r
		}
	}
	name(r.servers)
	return r
}

// fromDSN describes the existing servers that dsns name.
func fromDSN(ctx context.Context, dsns []string) ([]*Server, error) {
	var servers []*Server
	for _, dsn := range dsns {
		u, err := url.Parse(dsn)
		if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
			return nil, fmt.Errorf("%s: want comma-separated postgres://user@host:port/db URLs, got %q", envDSN, redact(dsn))
		}
		vctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		v, err := probe(vctx, dsn)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%s: server %s: %w", envDSN, redact(dsn), err)
		}
		servers = append(servers, &Server{DSN: dsn, Version: v})
	}
	name(servers)
	return servers, nil
}

// stopEach calls every stop concurrently and waits for them.
func stopEach(stops []func()) {
	var wg sync.WaitGroup
	for _, stop := range stops {
		wg.Go(stop)
	}
	wg.Wait()
}

// redact hides a password in a URL for messages.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// errShort reports that a test binary under go test -short asked for a
// server.
var errShort = errors.New("go test -short starts no PostgreSQL; skip this test under testing.Short()")

// errNotFound reports that a way to run PostgreSQL is not available here.
var errNotFound = errors.New("not found")
