// Command leader shows leader election with [leader.Run]: three candidates
// campaign for one key, one leads, and when its session is ended behind
// its back (as a crash or a failover would end it) another takes over
// within milliseconds, with a higher fencing token.
//
//	go -C examples run ./leader [-driver pq|pgx|pgxpool] [-takeovers 2]
//
// With -driver pgxpool it runs on a *pgxpool.Pool, as a program on pgx's
// own API does.
//
// It uses the database in DATABASE_URL when that is set. Otherwise it
// starts a disposable PostgreSQL (in Docker, or from local initdb and
// postgres binaries) and removes it when it ends.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/pgadvisory/pgadvisory/advisory"
	"github.com/pgadvisory/pgadvisory/advisory/leader"
	"github.com/pgadvisory/pgadvisory/pgtest"
)

// schedulerKey is the key the candidates campaign for.
var schedulerKey = advisory.NameKey(1, "example-scheduler")

func main() {
	driver := flag.String("driver", "pq", "pq or pgx (database/sql drivers), or pgxpool (a pgx pool through stdlib.OpenDBFromPool)")
	takeovers := flag.Int("takeovers", 2, "how many times to end the leader's session")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, *driver, *takeovers); err != nil {
		fmt.Fprintln(os.Stderr, "leader:", err)
		os.Exit(1)
	}
}

// term is one candidate's time as leader.
type term struct {
	candidate int
	token     int64
}

func run(ctx context.Context, out io.Writer, driver string, takeovers int) error {
	if takeovers < 1 {
		return fmt.Errorf("need at least one takeover, got %d", takeovers)
	}
	// With -driver pgxpool, db is stdlib.OpenDBFromPool(pool), as a program
	// on pgx's own API writes it: the recipe takes a *sql.DB because it is
	// built on advisory, which runs on database/sql with any driver.
	db, about, closeDB, err := pgtest.OpenExample(ctx, driver, out)
	if err != nil {
		return err
	}
	defer closeDB()
	fmt.Fprintln(out, about)

	var mu sync.Mutex
	var terms []term
	started := make(chan term, 16)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for c := range 3 {
		wg.Go(func() {
			errs[c] = leader.Run(ctx, db, schedulerKey, func(ctx context.Context, l *advisory.Lease) error {
				t := term{candidate: c + 1, token: l.Token()}
				mu.Lock()
				terms = append(terms, t)
				mu.Unlock()
				started <- t
				<-ctx.Done() // lead until the lead ends; real work goes here
				return nil
			}, leader.Heartbeat(500*time.Millisecond), leader.Backoff(50*time.Millisecond, time.Second), leader.Fencing())
		})
	}
	stop := func() error {
		cancel()
		wg.Wait()
		for _, err := range errs {
			if !errors.Is(err, context.Canceled) {
				return err
			}
		}
		return nil
	}

	t := <-started
	fmt.Fprintf(out, "candidate %d leads with fencing token %d\n", t.candidate, t.token)
	for range takeovers {
		info, ok, err := leader.Current(ctx, db, schedulerKey)
		if err != nil || !ok {
			stop()
			return fmt.Errorf("who leads: %v, %v", ok, err)
		}
		fmt.Fprintf(out, "ending the leader's session, backend %s\n", info)
		began := time.Now()
		if _, err := db.ExecContext(ctx, "SELECT pg_terminate_backend($1)", info.PID); err != nil {
			stop()
			return err
		}
		for t2 := range started {
			if t2.token > t.token {
				t = t2
				break
			}
		}
		fmt.Fprintf(out, "candidate %d took over after %v with fencing token %d\n",
			t.candidate, time.Since(began).Round(time.Millisecond), t.token)
	}
	if err := stop(); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(terms); i++ {
		if terms[i].token <= terms[i-1].token {
			return fmt.Errorf("fencing tokens did not increase: %v", terms)
		}
	}
	fmt.Fprintf(out, "%d terms, fencing tokens strictly increasing\n", len(terms))
	return nil
}
